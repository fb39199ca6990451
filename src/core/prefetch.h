// A prefetch the compiler keeps. GCC 12 at -O3 deletes __builtin_prefetch where it
// sees nothing else done: a loop whose body only prefetches (InitMerges' fetch of the
// next chunk's tokens was gone from the object code, and the stalls it was meant to
// hide were a third of that function's time) and, seen before, a helper after an
// early return. A volatile asm is never deleted. Check the disassembly (objdump -d,
// "prefetcht0") after writing a prefetch with the builtin.
#pragma once

namespace ek {

inline void Prefetch(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace ek
