#include "trace.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "json.h"

#if __has_include(<cupti.h>)
#include <cupti.h>
#define CUCO_HAVE_CUPTI 1
#else
#define CUCO_HAVE_CUPTI 0
#endif

namespace cuco_harness {

#if CUCO_HAVE_CUPTI
namespace {

using EnableFn = CUptiResult (*)(CUpti_ActivityKind);
using RegisterFn = CUptiResult (*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
using FlushFn = CUptiResult (*)(uint32_t);
using NextFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);

struct Api {
  EnableFn enable = nullptr, disable = nullptr;
  RegisterFn register_callbacks = nullptr;
  FlushFn flush_all = nullptr;
  NextFn next_record = nullptr;
};
Api api;

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};
constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

const char* copy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

}  // namespace

struct TracerAccess {
  static void add(const TraceRecord& r) {
    Tracer& t = Tracer::instance();
    std::lock_guard<std::mutex> lk(t.mu_);
    t.records_.push_back(r);
  }
};

namespace {

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (api.next_record && api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    TraceRecord r;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      r.name = k->name ? k->name : "?", r.kind = "kernel", r.device = (int)k->deviceId, r.stream = k->streamId;
      r.start_ns = k->start, r.end_ns = k->end;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      r.name = copy_name(m->copyKind), r.kind = "memcpy", r.device = (int)m->deviceId, r.stream = m->streamId;
      r.start_ns = m->start, r.end_ns = m->end, r.bytes = m->bytes;
      r.peer = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpyPtoP4*>(rec);
      r.name = "memcpy PtoP", r.kind = "memcpy", r.device = (int)m->deviceId, r.stream = m->streamId;
      r.start_ns = m->start, r.end_ns = m->end, r.bytes = m->bytes, r.peer = true;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
      r.name = "memset", r.kind = "memset", r.device = (int)m->deviceId, r.stream = m->streamId;
      r.start_ns = m->start, r.end_ns = m->end, r.bytes = m->bytes;
    } else {
      continue;
    }
    TracerAccess::add(r);
  }
  std::free(buffer);
}

template <typename F>
bool sym(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

}  // namespace

Tracer& Tracer::instance() {
  static Tracer t;
  return t;
}

std::string Tracer::load() {
  if (lib_) return "";
  for (const char* name : {"libcupti.so", "libcupti.so.13", "libcupti.so.12"}) {
    lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib_) break;
  }
  if (!lib_)
    return "libcupti could not be loaded (" + std::string(dlerror() ? dlerror() : "not found") +
           "): add the CUDA toolkit's CUPTI library folder (e.g. /usr/local/cuda/extras/CUPTI/lib64) to "
           "LD_LIBRARY_PATH, or run without --trace";
  if (!sym(lib_, "cuptiActivityEnable", &api.enable) || !sym(lib_, "cuptiActivityDisable", &api.disable) ||
      !sym(lib_, "cuptiActivityRegisterCallbacks", &api.register_callbacks) ||
      !sym(lib_, "cuptiActivityFlushAll", &api.flush_all) ||
      !sym(lib_, "cuptiActivityGetNextRecord", &api.next_record))
    return "libcupti lacks the activity API this harness uses: install a CUPTI matching the CUDA toolkit";
  if (api.register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS)
    return "cuptiActivityRegisterCallbacks failed (another profiler attached?)";
  return "";
}

std::string Tracer::start() {
  for (CUpti_ActivityKind k : kKinds)
    if (api.enable(k) != CUPTI_SUCCESS && k != CUPTI_ACTIVITY_KIND_MEMCPY2)
      return "cuptiActivityEnable failed for kind " + std::to_string((int)k);
  return "";
}

std::string Tracer::stop() {
  for (CUpti_ActivityKind k : kKinds) api.disable(k);
  return api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS ? "" : "cuptiActivityFlushAll failed";
}

#else  // a toolkit without CUPTI headers: the harness builds and says so when asked to trace
Tracer& Tracer::instance() {
  static Tracer t;
  return t;
}
std::string Tracer::load() { return "this harness was built without CUPTI headers (cupti.h): install the CUDA "
                                    "toolkit's CUPTI and rebuild, or run without --trace"; }
std::string Tracer::start() { return load(); }
std::string Tracer::stop() { return load(); }
#endif

void Tracer::discard() {
#if CUCO_HAVE_CUPTI
  if (api.flush_all) api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
#endif
  take();
}

std::vector<TraceRecord> Tracer::take() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<TraceRecord> out;
  out.swap(records_);
  return out;
}

std::string trace_json(const std::vector<TraceRecord>& records, const std::vector<std::pair<int, int>>& device_rank) {
  JsonWriter w;
  w.begin_object();
  w.key("devices").begin_object();
  for (auto& dr : device_rank) w.key(std::to_string(dr.first)).value(static_cast<int64_t>(dr.second));
  w.end_object();
  w.key("records").begin_array();
  for (const TraceRecord& r : records) {
    w.begin_object();
    w.key("name").value(r.name);
    w.key("kind").value(r.kind);
    w.key("device").value(static_cast<int64_t>(r.device));
    w.key("stream").value(static_cast<int64_t>(r.stream));
    w.key("start_ns").value(static_cast<int64_t>(r.start_ns));
    w.key("end_ns").value(static_cast<int64_t>(r.end_ns));
    w.key("bytes").value(static_cast<int64_t>(r.bytes));
    w.key("peer").value(r.peer);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str();
}

}  // namespace cuco_harness
