// RUN: g4c opt %s --split-input-file --g4-plan-offload="budget-mib=12 context-mib=0 workspace-mib=1 graph-pool-mib=0" | FileCheck %s --check-prefix=FITS
// RUN: g4c opt %s --split-input-file --g4-plan-offload="budget-mib=10 context-mib=0 workspace-mib=1 graph-pool-mib=0" | FileCheck %s --check-prefix=STREAM

// Embedding 1 MiB + four layers of one 2 MiB Linear; KV 1 MiB, workspaces 1 MiB.
// Everything resident: 9 + 1 + 1 = 11 MiB. Streaming the last k layers needs a 2 x 2 MiB
// double buffer: k=1 13 MiB, k=2 11 MiB, k=3 9 MiB, k=4 7 MiB.
// Budget 12: all resident, no prefetch. Budget 10: the last three layers stream.
module attributes {g4.kv = {pool_bytes = 1048576 : i64}} {
  // FITS: g4.memory_table = {activations = 0 : i64, budget = 12582912 : i64, context = 0 : i64, graph_pools = 0 : i64, kv = 1048576 : i64, staging = 0 : i64, streamed_layers = 0 : i64, total = 11534336 : i64, weights_resident = 9437184 : i64, weights_streamed = 0 : i64, workspaces = 1048576 : i64}
  // STREAM: g4.memory_table = {activations = 0 : i64, budget = 10485760 : i64, context = 0 : i64, graph_pools = 0 : i64, kv = 1048576 : i64, staging = 4194304 : i64, streamed_layers = 3 : i64, total = 9437184 : i64, weights_resident = 3145728 : i64, weights_streamed = 6291456 : i64, workspaces = 1048576 : i64}
  // FITS-DAG: g4.weight @embed {{.*}}residency = "resident"
  // FITS-DAG: g4.weight @w3 {{.*}}residency = "resident"
  // STREAM-DAG: g4.weight @embed {{.*}}residency = "resident"
  // STREAM-DAG: g4.weight @w0 {{.*}}residency = "resident"
  // STREAM-DAG: g4.weight @w1 {{.*}}residency = "streamed"
  // STREAM-DAG: g4.weight @w2 {{.*}}residency = "streamed"
  // STREAM-DAG: g4.weight @w3 {{.*}}residency = "streamed"
  g4.weight @embed : tensor<1024x512xbf16>
  g4.weight @w0 : tensor<2048x512xbf16> {layer = 0 : i64}
  g4.weight @w1 : tensor<2048x512xbf16> {layer = 1 : i64}
  g4.weight @w2 : tensor<2048x512xbf16> {layer = 2 : i64}
  g4.weight @w3 : tensor<2048x512xbf16> {layer = 3 : i64}
  // FITS-LABEL: func.func @layers
  // FITS-NOT: g4.prefetch
  // FITS-NOT: g4.wait
  // STREAM-LABEL: func.func @layers
  // Layer i+1 is prefetched into the other slot when layer i starts and waited for before use.
  // STREAM-NEXT: g4.prefetch [@w1] {layer = 1 : i64, slot = 0 : i64}
  // STREAM-NEXT: g4.linear %{{.*}}, @w0
  // STREAM-NEXT: g4.wait {layer = 1 : i64, slot = 0 : i64}
  // STREAM-NEXT: g4.prefetch [@w2] {layer = 2 : i64, slot = 1 : i64}
  // STREAM-NEXT: g4.linear %{{.*}}, @w1
  // STREAM-NEXT: g4.wait {layer = 2 : i64, slot = 1 : i64}
  // STREAM-NEXT: g4.prefetch [@w3] {layer = 3 : i64, slot = 0 : i64}
  // STREAM-NEXT: g4.linear %{{.*}}, @w2
  // STREAM-NEXT: g4.wait {layer = 3 : i64, slot = 0 : i64}
  // STREAM-NEXT: g4.linear %{{.*}}, @w3
  func.func @layers(%x: tensor<?x512xf32>) -> tensor<?x2048xf32> {
    %a = g4.linear %x, @w0 {g4.layer = 0 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    %b = g4.linear %x, @w1 {g4.layer = 1 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    %c = g4.linear %x, @w2 {g4.layer = 2 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    %d = g4.linear %x, @w3 {g4.layer = 3 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    return %d : tensor<?x2048xf32>
  }
}
