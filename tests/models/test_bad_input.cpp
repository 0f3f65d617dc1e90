// Bad input for models/: every case gives one g4c::Error naming the file and
// what is wrong, and nothing crashes. Labelled "sanitize": CI runs it under ASan+UBSan.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/error.h"
#include "models/manifest.h"
#include "models/safetensors.h"

using namespace g4c;
using namespace g4c::models;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

class BadInput : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("g4c_bad_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path put(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // A safetensors file: 8-byte length + header + data.
  fs::path put_st(const std::string& name, const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    return put(name, out + header + data);
  }
  static void expect_error(const std::function<void()>& f, const std::string& file, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one naming " << file << " and '" << what << "'";
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(file), std::string::npos) << "message does not name the file: " << m;
      EXPECT_NE(m.find(what), std::string::npos) << "message does not say '" << what << "': " << m;
    }
  }
  static json tiny() {
    const char* s = std::getenv("G4C_SOURCE_DIR");
    std::ifstream in(fs::path(s ? s : ".") / "models/gemma4-tiny/config.json");
    return json::parse(in);
  }
  fs::path dir_;
};

}  // namespace

TEST_F(BadInput, ConfigMissingField) {
  json j = tiny();
  j.erase("hidden_size");
  put("config.json", j.dump());
  expect_error([&] { load_model_config(dir_); }, (dir_ / "config.json").string(), "'hidden_size' is missing");
}

TEST_F(BadInput, ConfigIllTypedField) {
  json j = tiny();
  j["num_hidden_layers"] = "twelve";
  put("config.json", j.dump());
  expect_error([&] { load_model_config(dir_); }, "config.json", "'num_hidden_layers' must be an integer");
  j = tiny();
  j["attention_k_eq_v"] = 1;
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "'attention_k_eq_v' must be a boolean");
  j = tiny();
  j["vocab_size"] = -5;
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "'vocab_size' must be a positive");
  j = tiny();
  j["layer_types"][3] = "global";
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "'layer_types'");
  j = tiny();
  j["layer_types"].erase(0);
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "has 11 entries");
  j = tiny();
  j["rope_parameters"]["full_attention"]["rope_type"] = "yarn";
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "rope_parameters.full_attention.rope_type");
  j = tiny();
  j["per_layer_config"]["77"] = json::object();
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "key '77'");
  j = tiny();
  j["hidden_size_per_layer_input"] = 256;
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "PLE");
  j = tiny();
  j["hidden_activation"] = "gelu";
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "'hidden_activation' is 'gelu'");
  j = tiny();
  j["attention_bias"] = true;
  expect_error([&] { parse_model_config(j, "c.json"); }, "c.json", "'attention_bias' is true");
}

TEST_F(BadInput, ConfigNestedFieldNamesPath) {
  json j{{"model_type", "gemma4"}, {"text_config", tiny()}};
  j["text_config"].erase("intermediate_size");
  expect_error([&] { parse_model_config(j, "n.json"); }, "n.json", "'text_config.intermediate_size' is missing");
  json k{{"model_type", "gemma4_unified"}};
  expect_error([&] { parse_model_config(k, "n.json"); }, "n.json", "'text_config' is missing");
}

TEST_F(BadInput, ConfigUnknownModelType) {
  json j = tiny();
  j["model_type"] = "llama";
  put("config.json", j.dump());
  expect_error([&] { load_model_config(dir_); }, "config.json", "unsupported model_type 'llama'");
}

TEST_F(BadInput, ConfigNotJsonAndAbsent) {
  expect_error([&] { load_model_config(dir_); }, "config.json", "no such file");
  put("config.json", "{\"model_type\": ");
  expect_error([&] { load_model_config(dir_); }, "config.json", "not valid JSON");
  put("config.json", tiny().dump());
  put("generation_config.json", R"({"eos_token_id": [1, "x"]})");
  expect_error([&] { load_model_config(dir_); }, "generation_config.json", "eos_token_id");
}

TEST_F(BadInput, SafetensorsTruncated) {
  fs::path p = put("model.safetensors", "\x10\x00\x00");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "truncated");
  p = put_st("model.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "");
  // Cut the header itself short: length says N, fewer bytes follow.
  std::string bytes(8, '\0');
  bytes[0] = 100;
  p = put("model.safetensors", bytes + "{\"a\":");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "truncated");
  // Header complete, data section missing.
  p = put_st("model.safetensors", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "abcd");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "outside the data section");
}

TEST_F(BadInput, SafetensorsNotJson) {
  fs::path p = put_st("model.safetensors", "this is not json", "");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "not valid JSON");
  p = put_st("model.safetensors", "[1, 2, 3]", "");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "not a JSON object");
  p = put_st("model.safetensors", R"({"a": 5})", "");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "tensor 'a'");
}

TEST_F(BadInput, SafetensorsOffsetsOutside) {
  fs::path p = put_st("model.safetensors", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})", "12345678");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "outside the data section");
  p = put_st("model.safetensors",
             R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})", "");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "tensor 'a'");
  p = put_st("model.safetensors", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[4,2]}})", "1234");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "end 2 < begin 4");
}

TEST_F(BadInput, SafetensorsOverlapping) {
  fs::path p = put_st("model.safetensors",
                      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      std::string(12, 'x'));
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "overlap");
}

TEST_F(BadInput, SafetensorsDtypeShapeMismatch) {
  fs::path p = put_st("model.safetensors", R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", "1234");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "needs 6 bytes but data_offsets span 4");
  p = put_st("model.safetensors", R"({"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", "1234");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "unknown dtype 'F8_E4M3'");
  p = put_st("model.safetensors", R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})",
             "1234");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "overflow");
  p = put_st("model.safetensors", R"({"a":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", "1234");
  expect_error([&] { SafetensorsFile::open(p); }, p.string(), "non-negative");
}

TEST_F(BadInput, ShardInIndexMissing) {
  put_st("model-00001-of-00002.safetensors", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x");
  put("model.safetensors.index.json",
      R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir_); }, "model.safetensors.index.json",
               "shard 'model-00002-of-00002.safetensors' named in the index is missing");
}

TEST_F(BadInput, IndexProblems) {
  put_st("model-00001-of-00001.safetensors", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x");
  put("model.safetensors.index.json", R"({"weight_map": {"zz": "model-00001-of-00001.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir_); }, "model.safetensors.index.json", "tensor 'zz'");
  put("model.safetensors.index.json", R"({"weight_map": {"a": "../etc/passwd"}})");
  expect_error([&] { Checkpoint::open(dir_); }, "model.safetensors.index.json", "not a plain file name");
  put("model.safetensors.index.json", R"({"metadata": {}})");
  expect_error([&] { Checkpoint::open(dir_); }, "model.safetensors.index.json", "'weight_map'");
  fs::remove(dir_ / "model.safetensors.index.json");
  fs::remove(dir_ / "model-00001-of-00001.safetensors");
  expect_error([&] { Checkpoint::open(dir_); }, dir_.string(), "no model.safetensors");
}

TEST_F(BadInput, ManifestProblems) {
  json m{{"format_version", 2}, {"method", {{"name", "rtn"}}}, {"modules", json::object()}};
  put("manifest.json", m.dump());
  expect_error([&] { read_manifest(dir_ / "manifest.json"); }, "manifest.json", "format_version");
  m["format_version"] = 1;
  m["modules"]["layers.0.mlp.up_proj"] = {{"qweight_key", "x"}, {"scales_key", "y"}, {"symmetric", false},
                                          {"bits", 4}, {"group_size", 128}, {"shape", {8, 8}}};
  put("manifest.json", m.dump());
  expect_error([&] { read_manifest(dir_ / "manifest.json"); }, "manifest.json",
               "'modules.layers.0.mlp.up_proj.zeros_key' is missing");
  m["modules"]["layers.0.mlp.up_proj"]["symmetric"] = true;
  m["modules"]["layers.0.mlp.up_proj"]["bits"] = 8;
  put("manifest.json", m.dump());
  expect_error([&] { read_manifest(dir_ / "manifest.json"); }, "manifest.json", "only 4 is supported");
}
