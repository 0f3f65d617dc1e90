// The bounded readers of user files (models/input_file.h) and the parsers' new checks: a
// directory, a device that never ends, an over-long line, a NUL byte, an output naming an input,
// a manifest whose redundant shape fields disagree, sampling values out of range.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "models/input_file.h"
#include "models/manifest.h"
#include "models/safetensors.h"
#include "runtime/serving.h"
#include "tests/runtime/support.h"

namespace g4c::models {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(InputFiles, DirectoriesAndDevicesAreRefusedByName) {
  const auto dir = test::temp_dir("input_files_dir");
  EXPECT_EQ(error_of([&] { read_regular_file(dir, "plan file", 1 << 20); }), dir.string() + ": plan file is a directory, not a file");
  EXPECT_EQ(error_of([&] { read_regular_file("/dev/zero", "plan file", 1 << 20); }),
            "/dev/zero: plan file is not a regular file");
  EXPECT_EQ(error_of([&] { read_regular_file(dir / "none", "JSON file", 1 << 20); }),
            (dir / "none").string() + ": JSON file does not exist");
  std::ofstream(dir / "big") << std::string(100, 'x');
  EXPECT_NE(error_of([&] { read_regular_file(dir / "big", "JSON file", 99); }).find("of 100 bytes is larger than the limit of 99"),
            std::string::npos);
  EXPECT_EQ(read_regular_file(dir / "big", "JSON file", 100), std::string(100, 'x'));
}

TEST(InputFiles, LineReaderBoundsLinesAndStopsAtBinaryData) {
  std::istringstream in("ab\n" + std::string(10, 'x') + "\nlast");
  LineReader r(in, 5, 1000);
  std::string line;
  EXPECT_EQ(r.next(line), LineReader::Status::Line);
  EXPECT_EQ(line, "ab");
  EXPECT_EQ(r.next(line), LineReader::Status::TooLong);  // skipped to its end
  EXPECT_EQ(r.line_number(), 2);
  EXPECT_EQ(r.next(line), LineReader::Status::Line);      // the line after it is still read
  EXPECT_EQ(line, "last");
  EXPECT_EQ(r.next(line), LineReader::Status::End);

  std::istringstream zeros(std::string("{}\n") + std::string(64, '\0'));
  LineReader z(zeros, 1 << 20, 1 << 20);
  EXPECT_EQ(z.next(line), LineReader::Status::Line);
  EXPECT_EQ(z.next(line), LineReader::Status::Binary);
  EXPECT_EQ(z.next(line), LineReader::Status::End);

  std::istringstream lots(std::string(100, 'y'));
  LineReader t(lots, 1 << 20, 50);
  EXPECT_EQ(t.next(line), LineReader::Status::TooBig);
}

TEST(InputFiles, DevZeroAsRequestsEndsAtOnce) {
  std::ifstream zero("/dev/zero", std::ios::binary);
  ASSERT_TRUE(zero);
  std::string why;
  const auto reqs = runtime::parse_requests(zero, "/dev/zero", nullptr, runtime::ServeOptions{}, &why);
  EXPECT_TRUE(reqs.empty());
  EXPECT_EQ(why, "/dev/zero:1: binary data (a NUL byte): not a jsonl file; the rest of it is not read");
}

TEST(InputFiles, OutputNamingAnInputIsRefused) {
  const auto dir = test::temp_dir("input_files_same");
  std::ofstream(dir / "in.jsonl") << "{}\n";
  std::filesystem::create_symlink(dir / "in.jsonl", dir / "link.jsonl");
  EXPECT_NE(error_of([&] { check_output_distinct(dir / "link.jsonl", "--output", dir / "in.jsonl", "--input"); })
                .find("--output names the same file as --input"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { check_output_distinct(dir / "out.jsonl", "--output", dir / "in.jsonl", "--input"); }), "");
}

nlohmann::json one_module(const std::string& field, nlohmann::json value) {
  QuantModule q = QuantModule::make("layers.0.mlp.up_proj", 64, 100, {32, true, DType::F16});
  Manifest m;
  m.add(q);
  auto j = manifest_to_json(m);
  j["modules"]["layers.0.mlp.up_proj"][field] = value;
  return j;
}

TEST(InputFiles, ManifestShapeFieldsMustAgreeWithTheShape) {
  // in 100, G 32: padded_in 128, qweight [64, 64], scales [64, 4].
  EXPECT_EQ(error_of([&] { parse_manifest(one_module("qweight_shape", {64, 64}), "m.json"); }), "");
  EXPECT_NE(error_of([&] { parse_manifest(one_module("qweight_shape", {64, 65}), "m.json"); })
                .find("m.json: field 'modules.layers.0.mlp.up_proj.qweight_shape' is [64,65] but shape [64, 100] with "
                      "group_size 32 implies [64, 64]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_manifest(one_module("scales_shape", {64, 3}), "m.json"); }).find("scales_shape"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_manifest(one_module("padded_in_features", 100), "m.json"); }).find("padded_in_features"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_manifest(one_module("shape", {int64_t(1) << 40, 100}), "m.json"); }).find("larger than 2^31"),
            std::string::npos);
}

TEST(InputFiles, SafetensorsIndexRefusesPathsAsShardNames) {
  auto idx = [](const std::string& shard) {
    return nlohmann::json{{"weight_map", {{"a", shard}}}};
  };
  EXPECT_EQ(parse_safetensors_index(idx("x.safetensors"), "i.json").shards, std::vector<std::string>{"x.safetensors"});
  for (const char* bad : {"../x.safetensors", "/etc/passwd", "..", ""})
    EXPECT_NE(error_of([&] { parse_safetensors_index(idx(bad), "i.json"); }).find("not a plain file name"), std::string::npos)
        << bad;
}

std::string request_error(const std::string& line) {
  std::istringstream in(line + "\n");
  const auto reqs = runtime::parse_requests(in, "r.jsonl", nullptr, runtime::ServeOptions{});
  return reqs.size() == 1 ? reqs[0].error : "(" + std::to_string(reqs.size()) + " requests)";
}

TEST(InputFiles, SamplingValuesAreCheckedBeforeNarrowing) {
  const std::string pre = R"({"input_ids": [2, 5], "sampling_params": {"temperature": 1, )";
  EXPECT_EQ(request_error(pre + R"("top_k": 1e10}})"), "r.jsonl:1: sampling_params.top_k must be an integer (-1: no top-k)");
  EXPECT_EQ(request_error(pre + R"("top_k": 0}})"), "r.jsonl:1: sampling_params.top_k must be -1 (no top-k) or >= 1, not 0");
  EXPECT_EQ(request_error(pre + R"("top_k": -7}})"), "r.jsonl:1: sampling_params.top_k must be -1 (no top-k) or >= 1, not -7");
  EXPECT_EQ(request_error(pre + R"("top_k": -1}})"), "");
  EXPECT_EQ(request_error(pre + R"("top_k": 10000000000}})"), "");  // more than the vocabulary: every token
  EXPECT_EQ(request_error(pre + R"("top_p": 2}})"), "r.jsonl:1: sampling_params.top_p must be in (0, 1]");
  EXPECT_EQ(request_error(R"({"input_ids": [2], "sampling_params": {"temperature": 1e300}})"),
            "r.jsonl:1: sampling_params.temperature must be a finite number >= 0");
  EXPECT_EQ(request_error(R"({"input_ids": [2], "max_new_tokens": 18446744073709551615})"), "");
  std::istringstream in(R"({"input_ids": [2], "max_new_tokens": 18446744073709551615})" "\n");
  EXPECT_EQ(runtime::parse_requests(in, "r", nullptr, {})[0].request.max_new_tokens, INT32_MAX);
}

}  // namespace
}  // namespace g4c::models
