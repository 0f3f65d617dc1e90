#include "tools/quant_writer.h"

#include <cstring>
#include <utility>

#include "models/dtype.h"
#include "models/error.h"

namespace g4c::cli {

namespace {

// A rewritten tensor in the checkpoint's dtype (BF16 / F16 / F32).
std::vector<uint8_t> encode_tensor(const std::vector<float>& values, DType dt, const std::string& name) {
  std::vector<uint8_t> out;
  if (dt == DType::F32) {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  if (dt != DType::BF16 && dt != DType::F16) throw Error("quantize: " + name + " is not BF16/F16/F32");
  out.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t u = dt == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
    std::memcpy(out.data() + 2 * i, &u, 2);
  }
  return out;
}

std::span<const uint8_t> bytes_of(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

// DST.partial beside DST (a trailing separator ignored), created empty.
std::filesystem::path partial_dir(std::filesystem::path dst) {
  if (!dst.has_filename()) dst = dst.parent_path();
  std::filesystem::path tmp = dst;
  tmp += ".partial";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  return tmp;
}

}  // namespace

QuantCheckpointWriter::QuantCheckpointWriter(const std::filesystem::path& dst, const models::Checkpoint& ck,
                                             const std::vector<models::LinearShape>& shapes,
                                             const models::int4::Params& params, bool fake_quant)
    : dst_(dst),
      tmp_(partial_dir(dst)),
      ck_(ck),
      params_(params),
      fake_quant_(fake_quant),
      wr_(tmp_, "", 2ull << 30) {
  for (const auto& s : shapes) by_weight_[s.name + ".weight"] = &s;
  for (const std::string& name : ck.names()) {  // the checkpoint's order, each Linear where its weight was
    const models::TensorInfo& info = ck.info(name);
    auto it = by_weight_.find(name);
    if (it == by_weight_.end()) {
      wr_.declare(info.name, info.dtype, info.shape);
      continue;
    }
    const models::LinearShape& s = *it->second;
    if (fake_quant) {
      wr_.declare(info.name, DType::F32, {s.out, s.in});
      continue;
    }
    models::QuantModule m = models::QuantModule::make(s.name, s.out, s.in, params);
    wr_.declare(m.qweight_key, DType::U8, {m.out, m.padded_in / 2});
    wr_.declare(m.scales_key, DType::F16, {m.out, m.groups()});
    if (!params.symmetric) wr_.declare(m.zeros_key, DType::U8, {m.out, m.groups()});
    modules_.emplace(s.name, std::move(m));
  }
  worker_ = std::thread([this] { run(); });
}

QuantCheckpointWriter::~QuantCheckpointWriter() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing_ = true;
    jobs_.clear();  // finish() was not reached: the rest is not written
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (!finished_) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }
}

void QuantCheckpointWriter::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closing_) throw Error("quantize: checkpoint writer already finished");
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void QuantCheckpointWriter::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return closing_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // closing, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (error_) continue;  // the checkpoint is lost already: finish() reports the first error
    }
    try {
      job();
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void QuantCheckpointWriter::linear(const std::string& linear, quant::QuantizedLinear q) {
  auto s = by_weight_.find(linear + ".weight");
  if (s == by_weight_.end()) throw Error("quantize: " + linear + " is not a quantized Linear of the model");
  if (q.out != s->second->out || q.in != s->second->in)
    throw Error("quantize: " + linear + " came out " + std::to_string(q.out) + "×" + std::to_string(q.in));
  post([this, linear, q = std::move(q)] {
    if (fake_quant_) {
      wr_.write(ck_.info(linear + ".weight").name, bytes_of(q.dequantized()));
      return;
    }
    const models::QuantModule& m = modules_.at(linear);
    wr_.write(m.qweight_key, models::int4::pack_codes(q.codes, q.out, q.padded_in));
    std::vector<uint16_t> scales(q.scales.size());
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = f32_to_f16(q.scales[i]);  // exact: already fp16 values
    wr_.write(m.scales_key, {reinterpret_cast<const uint8_t*>(scales.data()), scales.size() * 2});
    if (!params_.symmetric) wr_.write(m.zeros_key, q.zeros);
  });
}

void QuantCheckpointWriter::others(const std::map<std::string, std::vector<float>>& rewritten) {
  for (const std::string& name : ck_.names()) {
    if (by_weight_.count(name)) continue;
    post([this, name, &rewritten] {
      const models::TensorInfo& info = ck_.info(name);
      if (auto r = rewritten.find(name); r != rewritten.end())
        wr_.write(info.name, encode_tensor(r->second, info.dtype, name));
      else
        wr_.write(info.name, ck_.get(name).bytes());
    });
  }
}

models::Manifest QuantCheckpointWriter::finish(const std::string& method) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (error_) std::rethrow_exception(error_);
  const std::vector<std::filesystem::path> files = wr_.finish();
  std::filesystem::create_directories(dst_);
  for (const std::filesystem::path& f : files) std::filesystem::rename(f, dst_ / f.filename());
  std::filesystem::remove_all(tmp_);
  finished_ = true;
  models::Manifest man;
  man.method_name = method;
  man.method_version = "1";
  if (!fake_quant_)
    for (const auto& [name, m] : modules_) man.add(m);
  return man;
}

}  // namespace g4c::cli
