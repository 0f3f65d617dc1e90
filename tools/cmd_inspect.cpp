// g4c inspect — print a compiled plan (.g4p) readably: header, model config, weights, KV
// layout, values, buckets and the program step by step. With --model, also checks that the
// plan matches that checkpoint.
#include <cstdio>

#include "models/config.h"
#include "models/safetensors.h"
#include "runtime/plan/plan.h"
#include "tools/cli.h"

namespace g4c::cli {

void add_inspect_command(CLI::App& app) {
  auto plan_path = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  auto no_weights = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("inspect", "print a plan file (.g4p)");
  cmd->add_option("plan", *plan_path, "plan file")->required();
  cmd->add_option("--model", *model, "also verify the plan against this checkpoint directory");
  cmd->add_flag("--no-weights", *no_weights, "leave out the weight table");
  cmd->callback([=] {
    auto p = plan::Plan::load_file(*plan_path);
    std::fputs(plan::describe(p, !*no_weights).c_str(), stdout);
    if (!model->empty()) {
      auto cfg = models::load_model_config(*model);
      auto ckpt = models::Checkpoint::open(*model);
      plan::verify_plan_matches(p, cfg, *ckpt);
      std::printf("plan matches checkpoint %s\n", model->c_str());
    }
  });
}

}  // namespace g4c::cli
