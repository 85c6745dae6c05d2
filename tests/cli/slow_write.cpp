// Test-only LD_PRELOAD shim for kill_writers.sh: delays fsync() and rename() (by $SLOW_WRITE_US, default 0.2 s) so
// that a kill -9 can land between a writer creating its temporary file and renaming it, a window of milliseconds.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace {

void pause_before_real_call() {
  const char* value = std::getenv("SLOW_WRITE_US");
  usleep(value ? static_cast<useconds_t>(std::atoi(value)) : 200000);
}

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto call = real<int (*)(int)>("fsync");
  pause_before_real_call();
  return call(fd);
}

extern "C" int rename(const char* from, const char* to) {
  static const auto call = real<int (*)(const char*, const char*)>("rename");
  pause_before_real_call();
  return call(from, to);
}
