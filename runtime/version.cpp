// Runtime library version (printed by `g4c --version` and written into summaries).
namespace g4c::runtime {
const char* version() { return "0.1.0"; }
}  // namespace g4c::runtime
