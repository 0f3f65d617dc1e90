// The driver's HessianStore seam (passes/quant/calibration.h): stores come from the factory,
// one per distinct input, are released after the last Linear that reads them, and device rows
// are offered first with the host rows as the fallback. The GPU store itself is tested on the
// GPU (tests/quant/test_gptq_device.cpp); here a recording store stands in for it.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "passes/quant/calibration.h"

using namespace g4c::quant;

namespace {

// One layer, three Linears: "a" and "b" read x (one group), "c" reads x·2 (another group).
// With `device` set, inputs are offered to the device observer first (the "device pointer" is
// the host pointer: the test store reads it as fp32 so the two paths are comparable).
class ThreeLinears : public CalibrationExecutor {
 public:
  ThreeLinears(int64_t rows, int64_t n) : rows_(rows), n_(n), x_(size_t(rows * n)), x2_(size_t(rows * n)) {
    std::mt19937 rng(7);
    std::normal_distribution<float> g(0.f, 1.f);
    for (size_t i = 0; i < x_.size(); ++i) x2_[i] = 2.f * (x_[i] = g(rng));
    for (const char* l : {"a", "b", "c"}) {
      auto& w = w_[l];
      w.resize(size_t(n * n));
      for (auto& v : w) v = 0.05f * g(rng);
    }
  }
  int num_layers() const override { return 1; }
  std::vector<LinearInfo> linears(int) const override { return {{"a", n_, n_}, {"b", n_, n_}, {"c", n_, n_}}; }
  std::vector<std::vector<std::string>> input_groups(int) const override { return {{"a", "b"}, {"c"}}; }
  void observe_group(int, int group, const Observer& observe) override {
    report(group == 0 ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"c"},
           group == 0 ? x_ : x2_, observe);
  }
  void run_layer(int, const Observer& observe, bool) override {
    if (!observe) return;
    report({"a", "b"}, x_, observe);
    report({"c"}, x2_, observe);
  }
  void set_device_observer(DeviceObserver o) override { dev_ = std::move(o); }
  std::vector<float> weight(int, const std::string& l) const override { return w_.at(l); }
  void set_weight(int, const std::string& l, std::span<const float> w) override { w_[l].assign(w.begin(), w.end()); }

  bool offer_device = false;
  int device_offers = 0, host_reports = 0;

 private:
  void report(const std::vector<std::string>& names, const std::vector<float>& x, const Observer& observe) {
    if (offer_device && dev_) {
      ++device_offers;
      if (dev_(names, x.data(), rows_, n_)) return;
    }
    ++host_reports;
    observe(names, x.data(), rows_, n_);
  }
  int64_t rows_, n_;
  std::vector<float> x_, x2_;
  std::map<std::string, std::vector<float>> w_;
  DeviceObserver dev_;
};

// A host store that records what happens to it; `takes_device` makes it accept device rows
// (read here as host fp32, see above).
struct Log {
  std::vector<std::string> events;
};
class RecordingStore : public HessianStore {
 public:
  RecordingStore(int64_t n, Log& log, int id, bool takes_device)
      : inner_(host_hessian_store(n, 1, {})), log_(log), id_(id), takes_device_(takes_device) {}
  int64_t n() const override { return inner_->n(); }
  int64_t rows() const override { return inner_->rows(); }
  void add(const float* X, int64_t rows, int64_t ld) override {
    log_.events.push_back("add" + std::to_string(id_));
    inner_->add(X, rows, ld);
  }
  bool add_device_bf16(const void* X, int64_t rows, int64_t ld) override {
    if (!takes_device_) return false;
    log_.events.push_back("device" + std::to_string(id_));
    inner_->add(static_cast<const float*>(X), rows, ld);
    return true;
  }
  GptqResult quantize(const float* W, int64_t out, const GptqOptions& opt) override {
    log_.events.push_back("quantize" + std::to_string(id_));
    return inner_->quantize(W, out, opt);
  }
  void release() override {
    log_.events.push_back("release" + std::to_string(id_));
    inner_->release();
  }

 private:
  std::unique_ptr<HessianStore> inner_;
  Log& log_;
  int id_;
  bool takes_device_;
};

std::map<std::string, std::vector<uint8_t>> run(ThreeLinears& ex, GptqDriverOptions opt) {
  std::map<std::string, std::vector<uint8_t>> codes;
  opt.gptq.spec = {32, true};
  opt.on_linear = [&](const LinearReport& r, const QuantizedLinear& q) { codes[r.name] = q.codes; };
  run_gptq(ex, opt);
  return codes;
}

TEST(HessianStore, FactoryStoresAreUsedPerInputAndReleasedAfterTheirLastLinear) {
  ThreeLinears ref_ex(200, 64), ex(200, 64);
  const auto ref = run(ref_ex, {});  // the default host stores
  Log log;
  int made = 0;
  GptqDriverOptions opt;
  opt.stores = [&](int64_t n) -> std::unique_ptr<HessianStore> {
    EXPECT_EQ(n, 64);
    return std::make_unique<RecordingStore>(n, log, made++, false);
  };
  EXPECT_EQ(run(ex, opt), ref);  // the same codes through the factory's stores
  EXPECT_EQ(made, 2);            // one per distinct input ({a, b} and {c})
  EXPECT_EQ(log.events, (std::vector<std::string>{"add0", "add1", "quantize0", "quantize0", "release0", "quantize1",
                                                  "release1"}));
}

TEST(HessianStore, DeviceRowsAreOfferedFirstAndTheHostPathIsTheFallback) {
  ThreeLinears ref_ex(150, 48);
  const auto ref = run(ref_ex, {});
  for (const bool takes : {true, false}) {
    ThreeLinears ex(150, 48);
    ex.offer_device = true;
    Log log;
    GptqDriverOptions opt;
    opt.stores = [&](int64_t n) -> std::unique_ptr<HessianStore> {
      return std::make_unique<RecordingStore>(n, log, 0, takes);
    };
    EXPECT_EQ(run(ex, opt), ref) << "takes_device " << takes;
    EXPECT_EQ(ex.device_offers, 2);
    EXPECT_EQ(ex.host_reports, takes ? 0 : 2);  // refused device rows come again as host rows
    const std::string first = takes ? "device0" : "add0";
    EXPECT_EQ(log.events.front(), first);
  }
  // True-sequential passes offer device rows the same way (observe_group).
  ThreeLinears ex(150, 48);
  ex.offer_device = true;
  GptqDriverOptions opt;
  opt.true_sequential = true;
  Log log;
  opt.stores = [&](int64_t n) -> std::unique_ptr<HessianStore> {
    return std::make_unique<RecordingStore>(n, log, 0, true);
  };
  run(ex, opt);
  EXPECT_EQ(ex.device_offers, 2);
  EXPECT_EQ(ex.host_reports, 0);
}

TEST(HessianStore, NoDeviceObserverIsLeftSetAfterAPass) {
  // The driver clears the device observer when an observing pass ends: an executor that would
  // offer rows afterwards (e.g. in the advancing forward) finds none.
  ThreeLinears ex(100, 32);
  ex.offer_device = true;
  GptqDriverOptions opt;
  opt.gptq.spec = {32, true};
  run_gptq(ex, opt);
  const int offers = ex.device_offers;
  ex.run_layer(0, [](const std::vector<std::string>&, const float*, int64_t, int64_t) {}, false);
  EXPECT_EQ(ex.device_offers, offers);
}

}  // namespace
