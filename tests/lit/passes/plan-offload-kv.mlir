// RUN: g4c opt %s --g4-plan-offload="budget-mib=12 context-mib=0 workspace-mib=1 graph-pool-mib=0" | FileCheck %s --check-prefix=SHRINK
// RUN: g4c opt %s --g4-plan-offload="budget-mib=10 context-mib=0 workspace-mib=1 graph-pool-mib=0" | FileCheck %s --check-prefix=STREAM

// Paged KV is elastic down to one sequence: the runtime sizes the block pool from what the
// budget leaves. Embedding 1 MiB + four layers of one 2 MiB Linear = 9 MiB of weights,
// workspaces 1 MiB; a ring of 0.5 MiB (fixed) and a paged pool of 4 MiB for 4 sequences
// (1 MiB each) — 4.5 MiB asked, 1.5 MiB at least.
// Budget 12: 9 + 1 + 4.5 = 14.5 does not fit, but 9 + 1 + 1.5 does: nothing streams and KV
// gets the 2 MiB left (not the whole 4.5). Budget 10: 9 + 1 + 1.5 = 11.5 > 10, so layers
// stream: k = 1 needs 7 + 4 (two slots) + 1 + 1.5 = 13.5, k = 2: 5 + 4 + 2.5 = 11.5,
// k = 3: 3 + 4 + 2.5 = 9.5 → the last three stream and KV gets 10 − 8 = 2 MiB (≤ 4.5).
module attributes {g4.kv = {pool_bytes = 4718592 : i64, max_seqs = 4 : i64}} {
  // SHRINK: g4.memory_table = {activations = 0 : i64, budget = 12582912 : i64, context = 0 : i64, graph_pools = 0 : i64, kv = 2097152 : i64, staging = 0 : i64, streamed_layers = 0 : i64, total = 12582912 : i64, weights_resident = 9437184 : i64, weights_streamed = 0 : i64, workspaces = 1048576 : i64}
  // STREAM: g4.memory_table = {activations = 0 : i64, budget = 10485760 : i64, context = 0 : i64, graph_pools = 0 : i64, kv = 2097152 : i64, staging = 4194304 : i64, streamed_layers = 3 : i64, total = 10485760 : i64, weights_resident = 3145728 : i64, weights_streamed = 6291456 : i64, workspaces = 1048576 : i64}
  // SHRINK-DAG: g4.weight @w3 {{.*}}residency = "resident"
  // STREAM-DAG: g4.weight @w0 {{.*}}residency = "resident"
  // STREAM-DAG: g4.weight @w1 {{.*}}residency = "streamed"
  g4.kv_buffer @kv.layer0 {bytes_per_token = 1024 : i64, capacity = 128 : i64, head_dim = 128 : i64, kind = "ring", layer = 0 : i64, max_seqs = 4 : i64, num_kv_heads = 2 : i64, pool_bytes = 524288 : i64}
  g4.kv_buffer @kv.layer1 {block_size = 16 : i64, bytes_per_token = 1024 : i64, head_dim = 256 : i64, kind = "paged", layer = 1 : i64, num_blocks = 256 : i64, num_kv_heads = 1 : i64, pool_bytes = 4194304 : i64}
  g4.weight @embed : tensor<1024x512xbf16>
  g4.weight @w0 : tensor<2048x512xbf16> {layer = 0 : i64}
  g4.weight @w1 : tensor<2048x512xbf16> {layer = 1 : i64}
  g4.weight @w2 : tensor<2048x512xbf16> {layer = 2 : i64}
  g4.weight @w3 : tensor<2048x512xbf16> {layer = 3 : i64}
  func.func @layers(%x: tensor<?x512xf32>) -> tensor<?x2048xf32> {
    %a = g4.linear %x, @w0 {g4.layer = 0 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    %b = g4.linear %x, @w1 {g4.layer = 1 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    %c = g4.linear %x, @w2 {g4.layer = 2 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    %d = g4.linear %x, @w3 {g4.layer = 3 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    return %d : tensor<?x2048xf32>
  }
}
