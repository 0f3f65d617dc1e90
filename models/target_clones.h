// G4C_TARGET_CLONES("arch=x86-64-v4", ..., "default"): one clone of a function per x86-64 level,
// chosen at load time by an ifunc resolver. ThreadSanitizer instruments the resolver, which the
// loader runs before the sanitizer is initialised (a crash at start): its builds keep the default
// clone alone.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define G4C_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define G4C_TSAN_BUILD 1
#endif
#endif

#ifdef G4C_TSAN_BUILD
#define G4C_TARGET_CLONES(...)
#else
#define G4C_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#endif
