// The CUDA backend's mapping of every plan step (KERNELS.md) to a kernel of runtime/cuda or
// of extra_kernels.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/error.h"
#include "runtime/cuda_backend/backend_state.h"

namespace g4c::cudart {
namespace {

float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

void ok(cudaError_t e, const fb::Step& st) {
  if (e != cudaSuccess)
    throw Error(std::string("cuda backend: ") + plan::kernel_name(st.kernel()) + " step " +
                (st.label() ? st.label()->str() : "") + ": " + cudaGetErrorString(e));
}

}  // namespace

void CudaBackend::run_step(int index, const fb::Step& st) {
  const auto* a = st.attrs();
  const cudaStream_t s = device_->stream();
  const Shape& sh = shape_;
  auto in = [&](int i) -> DevValue& { return values_.at(st.inputs()->Get(i)); };
  auto out = [&](int i) -> DevValue& { return values_.at(st.outputs()->Get(i)); };
  auto in_id = [&](int i) { return st.inputs()->Get(i); };
  auto out_id = [&](int i) { return st.outputs()->Get(i); };
  auto wid = [&](int i) { return st.weights() && int(st.weights()->size()) > i ? st.weights()->Get(i) : -1; };
  auto wvec = [&](int i) -> const bf16* {
    const int w = wid(i);
    if (w < 0) return nullptr;
    if (weights_[w].kind != DevWeight::kBf16)
      throw Error("cuda backend: step " + st.label()->str() + " needs weight " + store_->name(w) + " as BF16");
    return weights_[w].ptr();
  };
  auto meta_i32 = [&](size_t off) { return reinterpret_cast<int*>(static_cast<unsigned char*>(meta_dev_) + off); };
  auto bf = [](DevValue& v) { return static_cast<bf16*>(v.ptr); };
  auto need_bf16 = [&](const DevValue& v) {
    if (v.type != VType::BF16) throw Error("cuda backend: step " + st.label()->str() + " expects a BF16 value");
  };
  const int T = sh.T;

  switch (st.kernel()) {
    case fb::KernelId::Embed: {
      const int w = wid(0);
      const int V = int(store_->shape(w)[0]);
      auto& h = out(0);
      need_bf16(h);
      // HF's bf16 run multiplies by a bf16 normalizer (KERNELS.md Embed).
      if (weights_[w].kind == DevWeight::kInt8Rows)
        ok(cuda::embed_gather_int8(meta_i32(meta_.tokens), T, weights_[w].rw, round_bf16(a->scale()), bf(h), h.cols, s),
           st);
      else
        ok(cuda::embed_gather_scale(meta_i32(meta_.tokens), T, weights_[w].ptr(), V, h.cols, round_bf16(a->scale()),
                                    bf(h), s),
           st);
      break;
    }
    case fb::KernelId::RmsNorm: {
      auto& x = in(0);
      auto& y = out(0);
      need_bf16(x);
      need_bf16(y);
      const int n = rows_of(in_id(0), sh);
      ok(cuda::rmsnorm(bf(x), x.cols, nullptr, n, x.cols, a->norm_dim(), wvec(0), a->eps(), bf(y), y.cols, s, kopts_), st);
      break;
    }
    case fb::KernelId::Linear: {
      if (auto g = sibling_of_.find(index); g != sibling_of_.end()) {
        run_siblings(index, g->second);
        break;
      }
      auto& x = in(0);
      auto& y = out(0);
      need_bf16(x);
      const int m = rows_of(in_id(0), sh);
      observe_linear_input(in_id(0), x.cols, {&index, 1});
      const DevWeight* w = nullptr;
      cuda::Epilogue ep = cuda::Epilogue::Store;
      cuda::GemmOut o;
      o.y = y.ptr;
      o.ldy = y.cols;
      switch (a->epilogue()) {
        case fb::Epilogue::GeluTanhGateUp: {
          auto it = pairs_.find({wid(0), wid(1)});
          if (it == pairs_.end()) throw Error("cuda backend: no fused gate/up weight for " + st.label()->str());
          w = &it->second;
          ep = cuda::Epilogue::GeluMul;
          break;
        }
        case fb::Epilogue::ResidualAdd: {
          w = &weights_[wid(0)];
          ep = cuda::Epilogue::ResidualAdd;
          auto& r = in(1);
          need_bf16(r);
          o.residual = bf(r);
          o.ldr = r.cols;
          break;
        }
        default: w = &weights_[wid(0)]; break;
      }
      if (y.type == VType::F32) {
        if (ep != cuda::Epilogue::Store) throw Error("cuda backend: fp32 output of a fused Linear " + st.label()->str());
        ep = cuda::Epilogue::SoftcapF32;
        o.softcap = 0.f;  // identity: a later Softcap step applies the cap
      } else {
        need_bf16(y);
      }
      if (w->kind == DevWeight::kInt8Rows && ep == cuda::Epilogue::SoftcapF32)  // the unfused LM head
        ok(cuda::w8a16_gemm_f32(bf(x), m, x.cols, w->rw, static_cast<float*>(y.ptr), y.cols, s), st);
      else if (w->kind == DevWeight::kInt4)
        ok(cuda::w4a16_gemm(bf(x), m, x.cols, w->iw, ep, o, gemm_ws_, gemm_ws_bytes_, s, kopts_), st);
      else if (w->kind == DevWeight::kBf16)
        ok(cuda::bf16_gemm(bf(x), m, x.cols, w->bw, ep, o, s), st);
      else
        throw Error("cuda backend: Linear " + st.label()->str() + " has no device weight");
      // An fp32 Linear output is HF's bf16 lm_head tensor: round it (the Softcap step follows).
      if (y.type == VType::F32) ok(round_softcap_bf16(static_cast<float*>(y.ptr), m, y.cols, y.cols, 0.f, s), st);
      break;
    }
    case fb::KernelId::QkNormRopeKvWrite: {
      const auto& kv = kv_[a->kv_layer()];
      auto& q = in(0);
      auto& k = in(1);
      auto& qo = out(0);
      const bf16* v_raw = a->v_from_k() ? nullptr : bf(in(2));
      const auto* slots =
          reinterpret_cast<const int64_t*>(static_cast<unsigned char*>(meta_dev_) + meta_.slots[kv.group]);
      if (kv.k8)
        ok(cuda::qk_norm_rope_kv_write(bf(q), bf(k), v_raw, wvec(0), wvec(1), meta_i32(meta_.positions), slots, T,
                                       a->num_q_heads(), a->num_kv_heads(), a->head_dim(), float(a->rope_theta()),
                                       a->rotary_pairs(), a->eps(), bf(qo),
                                       cuda::Fp8Kv{kv.k8, kv.v8, kv.k_scale, kv.v_scale}, s, kopts_),
           st);
      else
        ok(cuda::qk_norm_rope_kv_write(bf(q), bf(k), v_raw, wvec(0), wvec(1), meta_i32(meta_.positions), slots, T,
                                       a->num_q_heads(), a->num_kv_heads(), a->head_dim(), float(a->rope_theta()),
                                       a->rotary_pairs(), a->eps(), bf(qo), kv.k, kv.v, s, kopts_),
           st);
      break;
    }
    case fb::KernelId::Attention: {
      const auto& kv = kv_[a->kv_layer()];
      const auto& grp = groups_[kv.group];
      cuda::KvCache c;
      c.k = kv.k;
      c.v = kv.v;
      c.k8 = kv.k8;
      c.v8 = kv.v8;
      c.k_scale = kv.k_scale;
      c.v_scale = kv.v_scale;
      if (grp.kind == fb::KvKind::Paged) {
        c.block_table = meta_i32(grp.windowed ? meta_.window_block_table : meta_.block_table);
        c.max_blocks = max_blocks_;
        c.block_size = grp.unit;
      } else {
        c.ring_base = meta_i32(meta_.ring_base[kv.group]);
        c.ring_capacity = grp.unit;
      }
      cuda::AttnBatch b;
      b.num_requests = sh.S;
      b.q_start = meta_i32(meta_.q_start);
      b.ctx_len = meta_i32(meta_.ctx_len);
      b.total_q = T;
      b.max_q_len = sh.max_q_len;
      b.max_kv_len = sh.max_kv_len;
      const int hq = a->num_q_heads(), hkv = a->num_kv_heads(), d = a->head_dim();
      int splits = cuda::attention_num_splits(b, hq, hkv, d, a->window(), cuda::gemm_stream_sms(s));
      while (splits > 1 && cuda::attention_workspace_bytes(b, hq, d, splits) > attn_ws_bytes_) --splits;
      ok(cuda::attention(bf(in(0)), hq, hkv, d, c, b, a->window(), a->scale(), bf(out(0)), splits, attn_ws_,
                         attn_ws_bytes_, s, kopts_),
         st);
      break;
    }
    case fb::KernelId::PostNormResidual: {
      auto& h = in(0);
      auto& x = in(1);
      auto& ho = out(0);
      need_bf16(h);
      if (in_id(0) != out_id(0))
        ok(cudaMemcpyAsync(ho.ptr, h.ptr, size_t(T) * h.cols * 2, cudaMemcpyDeviceToDevice, s), st);
      const bool next = st.outputs()->size() > 1 && wid(2) >= 0;
      ok(cuda::add_rmsnorm(bf(x), wvec(0), bf(ho), wvec(1), next ? wvec(2) : nullptr, next ? bf(out(1)) : nullptr, T,
                           h.cols, a->eps(), s, kopts_),
         st);
      break;
    }
    case fb::KernelId::LmHead: {
      auto& h = in(0);
      auto& lg = out(0);
      need_bf16(h);
      const int e = wid(1);
      const DevWeight& E = weights_[e];
      if (E.kind != DevWeight::kBf16 && E.kind != DevWeight::kInt8Rows)
        throw Error("cuda backend: the LM head weight must be BF16 or an INT8 table");
      ok(cuda::rmsnorm(bf(h), h.cols, meta_i32(meta_.logit_rows), sh.R, h.cols, h.cols, wvec(0), a->eps(), lm_tmp_,
                       h.cols, s, kopts_),
         st);
      cuda::GemmOut o;
      o.y = lg.ptr;
      o.ldy = lg.cols;
      // fp32 GEMM output, then HF's bf16 rounding of the lm_head output and its three bf16
      // softcap ops (tests/bf16/hf_bf16.h points 10–11): greedy ties then break as torch's do.
      o.softcap = 0.f;
      if (E.kind == DevWeight::kInt8Rows)
        ok(cuda::w8a16_gemm_f32(lm_tmp_, sh.R, h.cols, E.rw, static_cast<float*>(lg.ptr), lg.cols, s), st);
      else
        ok(cuda::bf16_gemm(lm_tmp_, sh.R, h.cols, E.bw, cuda::Epilogue::SoftcapF32, o, s), st);
      ok(round_softcap_bf16(static_cast<float*>(lg.ptr), sh.R, lg.cols, lg.cols, a->softcap(), s), st);
      break;
    }
    case fb::KernelId::Argmax: {
      auto& lg = in(0);
      if (lg.type != VType::F32) throw Error("cuda backend: Argmax expects fp32 logits");
      ok(cuda::argmax_rows(static_cast<const float*>(lg.ptr), sh.R, lg.cols, lg.cols, static_cast<int*>(out(0).ptr), s),
         st);
      break;
    }
    // ---- unfused form (simple kernels of extra_kernels.h) ----
    case fb::KernelId::Rope: {
      auto& x = in(0);
      auto& y = out(0);
      need_bf16(x);
      if (in_id(0) != out_id(0))
        ok(cudaMemcpyAsync(y.ptr, x.ptr, size_t(T) * x.cols * 2, cudaMemcpyDeviceToDevice, s), st);
      ok(rope(bf(y), T, y.cols / a->head_dim(), a->head_dim(), a->rotary_pairs(), a->rope_theta(),
              meta_i32(meta_.positions), s),
         st);
      break;
    }
    case fb::KernelId::KvWrite: {
      const auto& kv = kv_[a->kv_layer()];
      const auto* slots =
          reinterpret_cast<const int64_t*>(static_cast<unsigned char*>(meta_dev_) + meta_.slots[kv.group]);
      if (kv.k8) {
        ok(kv_write_fp8(bf(in(0)), slots, T, kv.heads, kv.head_dim, kv.k8, kv.k_scale, s), st);
        ok(kv_write_fp8(bf(in(1)), slots, T, kv.heads, kv.head_dim, kv.v8, kv.v_scale, s), st);
      } else {
        ok(kv_write(bf(in(0)), slots, T, kv.row, kv.k, s), st);
        ok(kv_write(bf(in(1)), slots, T, kv.row, kv.v, s), st);
      }
      break;
    }
    case fb::KernelId::Add:
    case fb::KernelId::Mul: {
      auto& x = in(0);
      const long n = long(rows_of(in_id(0), sh)) * x.cols;
      ok(binary(st.kernel() == fb::KernelId::Add ? 0 : 1, x.ptr, in(1).ptr, out(0).ptr, n, x.type, s), st);
      break;
    }
    case fb::KernelId::Scale: {
      auto& x = in(0);
      const long n = long(rows_of(in_id(0), sh)) * x.cols;
      ok(scale(x.ptr, wvec(0), a->scale(), out(0).ptr, n, x.type, s), st);
      break;
    }
    case fb::KernelId::GeluTanh:
    case fb::KernelId::Softcap: {
      auto& x = in(0);
      const long n = long(rows_of(in_id(0), sh)) * x.cols;
      ok(unary(st.kernel() == fb::KernelId::GeluTanh ? 0 : 1, x.ptr, out(0).ptr, n, a->softcap(), x.type, s), st);
      break;
    }
    case fb::KernelId::SelectLogitRows: {
      auto& x = in(0);
      ok(select_rows(x.ptr, meta_i32(meta_.logit_rows), sh.R, x.cols, out(0).ptr, x.type, s), st);
      break;
    }
    default:
      throw Error(std::string("cuda backend: kernel ") + plan::kernel_name(st.kernel()) + " is not supported");
  }
}

// A sibling group's members: the first one run in a run_steps call does the group's GEMM into
// sib_out_ and copies the column ranges of the members inside that call's step range to their
// output values (a piece that ends inside the group neither writes nor observes the rest);
// later members are done.
// The Linear observers (GPTQ): the input of `steps` (Linears reading value xid) as device rows
// to the device observer, else as host fp32 rows (read once) to the host observer.
void CudaBackend::observe_linear_input(int xid, int cols, std::span<const int> steps) {
  if (capturing_ || steps.empty()) return;
  if (device_observer_) {
    int rows = 0;
    const void* xd = device_value_bf16(xid, &rows);
    for (int k : steps) device_observer_(k, xd, rows, cols);
  } else if (observer_) {
    std::vector<float> host;
    const int rows = read_value(xid, &host);
    for (int k : steps) observer_(k, host.data(), rows, cols);
  }
}

void CudaBackend::run_siblings(int index, int gi) {
  if (sib_done_ == gi) return;
  const SiblingGroup& g = siblings_[gi];
  const auto* prog = (*plan_)->program();
  const auto& st = *prog->Get(index);
  const cudaStream_t s = device_->stream();
  const int xid = st.inputs()->Get(0);
  auto& x = values_.at(xid);
  const int m = rows_of(xid, shape_);
  std::vector<int> observed;  // the group's steps inside the range being run
  for (int k : g.steps)
    if (k >= run_first_ && k < run_last_) observed.push_back(k);
  observe_linear_input(xid, x.cols, observed);
  cuda::GemmOut o;
  o.y = sib_out_;
  o.ldy = g.total;
  if (g.w.kind == DevWeight::kInt4)
    ok(cuda::w4a16_gemm(static_cast<const bf16*>(x.ptr), m, x.cols, g.w.iw, cuda::Epilogue::Store, o, gemm_ws_,
                        gemm_ws_bytes_, s, kopts_),
       st);
  else
    ok(cuda::bf16_gemm(static_cast<const bf16*>(x.ptr), m, x.cols, g.w.bw, cuda::Epilogue::Store, o, s), st);
  int col = 0;
  for (int k = 0; k < int(g.steps.size()); ++k) {
    auto& y = values_.at(prog->Get(g.steps[k])->outputs()->Get(0));
    if (m > 0 && g.steps[k] >= run_first_ && g.steps[k] < run_last_)
      ok(cudaMemcpy2DAsync(y.ptr, size_t(y.cols) * 2, sib_out_ + col, size_t(g.total) * 2, size_t(g.cols[k]) * 2, m,
                           cudaMemcpyDeviceToDevice, s),
         st);
    col += g.cols[k];
  }
  sib_done_ = gi;
}

}  // namespace g4c::cudart
