// Liveness-shared value placement (value_arena.h).
#include "runtime/plan/value_arena.h"

#include <algorithm>
#include <numeric>

namespace g4c::plan {
namespace {
bool intersect(const Lifetime& a, const Lifetime& b) { return a.first <= b.last && b.first <= a.last; }
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

std::vector<Lifetime> value_lifetimes(const Plan& plan) {
  const auto* vals = plan->values();
  std::vector<Lifetime> life(vals ? vals->size() : 0);
  const auto* prog = plan->program();
  const int n = prog ? int(prog->size()) : 0;
  auto touch = [&](int v, int i) {
    if (v < 0 || v >= int(life.size())) return;
    if (life[v].first < 0) life[v].first = i;
    life[v].last = std::max(life[v].last, i);
  };
  for (int i = 0; i < n; ++i) {
    const auto* st = prog->Get(i);
    if (st->inputs())
      for (int v : *st->inputs()) touch(v, i);
    if (st->outputs())
      for (int v : *st->outputs()) touch(v, i);
  }
  auto to_end = [&](int v) {
    if (v >= 0 && v < int(life.size()) && life[v].first >= 0) life[v].last = n;
  };
  to_end(plan->logits_value());
  for (int i = 0; i < n; ++i) {
    const auto* st = prog->Get(i);
    if ((st->kernel() == fb::KernelId::LmHead || st->kernel() == fb::KernelId::Argmax) && st->outputs())
      for (int v : *st->outputs()) to_end(v);
  }
  return life;
}

ArenaLayout place_values(const std::vector<Lifetime>& life, const std::vector<size_t>& size, size_t align) {
  ArenaLayout a;
  const size_t n = std::min(life.size(), size.size());
  a.offset.assign(life.size(), 0);
  std::vector<int> order;
  for (size_t v = 0; v < n; ++v)
    if (size[v] > 0 && life[v].first >= 0) order.push_back(int(v));
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return size[x] > size[y]; });
  std::vector<int> placed;
  for (int v : order) {
    const size_t need = round_up(size[v], align);
    // Byte ranges taken by placed values whose lifetimes intersect v's, by start.
    std::vector<std::pair<size_t, size_t>> busy;
    for (int p : placed)
      if (intersect(life[v], life[p])) busy.emplace_back(a.offset[p], a.offset[p] + round_up(size[p], align));
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + need <= b) break;
      at = std::max(at, e);
    }
    a.offset[v] = at;
    a.bytes = std::max(a.bytes, at + need);
    placed.push_back(v);
  }
  return a;
}

bool arena_is_consistent(const std::vector<Lifetime>& life, const std::vector<size_t>& size, const ArenaLayout& a) {
  const size_t n = std::min(life.size(), size.size());
  for (size_t x = 0; x < n; ++x) {
    if (!size[x] || life[x].first < 0) continue;
    if (a.offset[x] + size[x] > a.bytes) return false;
    for (size_t y = x + 1; y < n; ++y) {
      if (!size[y] || life[y].first < 0 || !intersect(life[x], life[y])) continue;
      if (a.offset[x] < a.offset[y] + size[y] && a.offset[y] < a.offset[x] + size[x]) return false;
    }
  }
  return true;
}

}  // namespace g4c::plan
