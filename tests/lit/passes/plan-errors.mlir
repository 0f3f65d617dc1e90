// Planning errors are diagnostics, not silent plans.
// RUN: g4c opt %s --split-input-file --verify-diagnostics --g4-plan-kv --g4-plan-offload="budget-mib=5 context-mib=0 workspace-mib=1 graph-pool-mib=0"

// No attention reads this cache (g4-plan-kv).
func.func @orphan(%k: tensor<?x32xf32>, %pos: tensor<?xi32>) {
  // expected-error @below {{no attention of layer 3 reads this cache}}
  g4.kv_write %pos key(%k : tensor<?x32xf32>) value(%k : tensor<?x32xf32>) {layer = 3 : i64, window = 0 : i64} : tensor<?xi32>
  return
}

// -----

// 1 MiB embedding + four 2 MiB layers, 1 MiB workspaces, no KV: at least 6 MiB even with
// every layer streamed (1 + 2 x 2 staging + 1) -> over a 5 MiB budget (g4-plan-offload).
// expected-error @below {{the model does not fit the device budget of 5 MiB even with every layer's weights streamed}}
module {
  g4.weight @embed : tensor<1024x512xbf16>
  g4.weight @w0 : tensor<2048x512xbf16> {layer = 0 : i64}
  g4.weight @w1 : tensor<2048x512xbf16> {layer = 1 : i64}
  g4.weight @w2 : tensor<2048x512xbf16> {layer = 2 : i64}
  g4.weight @w3 : tensor<2048x512xbf16> {layer = 3 : i64}
  func.func @layers(%x: tensor<?x512xf32>) -> tensor<?x2048xf32> {
    %a = g4.linear %x, @w0 {g4.layer = 0 : i64} : tensor<?x512xf32> -> tensor<?x2048xf32>
    return %a : tensor<?x2048xf32>
  }
}
