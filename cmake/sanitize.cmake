# -DFUSEBOX_SANITIZE=address: AddressSanitizer + UndefinedBehaviorSanitizer
# (any UB report aborts the test); thread: ThreadSanitizer. Applied to the
# library, tests and bench, and exported with the installed target (a
# sanitized libfusebox.a needs the sanitizer runtime at link time). The CPU
# kernels compiled at run time get the same flags (FUSEBOX_KERNEL_SANITIZE_FLAGS,
# part of their compile-cache key), so a kernel reading out of bounds is
# caught too. Use a build folder of its own: tests/sanitize.sh.
set(FUSEBOX_SANITIZE "" CACHE STRING "Sanitizers to build with: address (ASan+UBSan), thread (TSan), or empty")
set_property(CACHE FUSEBOX_SANITIZE PROPERTY STRINGS "" address thread)
if(FUSEBOX_SANITIZE STREQUAL "address")
  set(FUSEBOX_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(FUSEBOX_SANITIZE STREQUAL "thread")
  set(FUSEBOX_SANITIZE_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT FUSEBOX_SANITIZE STREQUAL "")
  message(FATAL_ERROR "FUSEBOX_SANITIZE must be address, thread or empty, not '${FUSEBOX_SANITIZE}'")
endif()
if(FUSEBOX_SANITIZE_FLAGS)
  add_compile_options(${FUSEBOX_SANITIZE_FLAGS})
  # -fsanitize turns off the toolchain's default --as-needed, and the binaries
  # would then need libcuda.so.1 (the driver stub is on the link line; the
  # driver itself is dlopen'ed): a machine without a GPU could not start them.
  set(FUSEBOX_SANITIZE_LINK_FLAGS ${FUSEBOX_SANITIZE_FLAGS} -Wl,--as-needed)
  add_link_options(${FUSEBOX_SANITIZE_LINK_FLAGS})
  list(JOIN FUSEBOX_SANITIZE_FLAGS " " FUSEBOX_KERNEL_SANITIZE_FLAGS)
endif()
