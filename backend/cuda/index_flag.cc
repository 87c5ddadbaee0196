#include "backend/cuda/index_flag.h"

#include <atomic>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "backend/index_check.h"
#include "tensor/mutex.h"

namespace fusebox::cuda {

struct IndexFlagSlot {
  int device = 0;
  CUdeviceptr words = 0;      // on the device: what the kernels write
  int64_t* host = nullptr;    // pinned: where the run's copy lands
  CUevent landed = nullptr;   // recorded after the copy
};

namespace {

constexpr size_t kSlotBytes = backend::kIndexCheckWords * sizeof(int64_t);
constexpr size_t kPageSlots = 128;  // pinned memory is taken a page (4 KB) at a time

std::atomic<int64_t> waits{0}, reads{0};

// Slots are made once and kept: a released one goes back to its device's list.
class SlotPool {
 public:
  static SlotPool& Get() {
    static SlotPool* pool = new SlotPool();
    return *pool;
  }

  absl::StatusOr<std::shared_ptr<IndexFlagSlot>> Take(int device) {
    IndexFlagSlot* slot = nullptr;
    {
      fusebox::MutexLock lock(&mu_);
      std::vector<IndexFlagSlot*>& list = free_[device];
      if (list.empty()) {
        if (absl::Status s = Grow(device, &list); !s.ok()) return s;
      }
      slot = list.back();
      list.pop_back();
    }
    return std::shared_ptr<IndexFlagSlot>(slot, [this](IndexFlagSlot* s) { Give(s); });
  }

 private:
  void Give(IndexFlagSlot* slot) {
    fusebox::MutexLock lock(&mu_);
    free_[slot->device].push_back(slot);
  }

  absl::Status Grow(int device, std::vector<IndexFlagSlot*>* list) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Driver& driver = Driver::Get();
    absl::StatusOr<void*> host = driver.HostAlloc(device, kSlotBytes * kPageSlots);
    if (!host.ok()) return host.status();
    absl::StatusOr<CUdeviceptr> words = driver.MemAlloc(device, kSlotBytes * kPageSlots);
    if (!words.ok()) return words.status();
    for (size_t k = 0; k < kPageSlots; ++k) {
      absl::StatusOr<CUevent> event = driver.CreateEvent(device, /*timing=*/false);
      if (!event.ok()) return event.status();
      list->push_back(new IndexFlagSlot{.device = device,
                                        .words = *words + k * kSlotBytes,
                                        .host = static_cast<int64_t*>(*host) + k * backend::kIndexCheckWords,
                                        .landed = *event});
    }
    return absl::OkStatus();
  }

  fusebox::Mutex mu_;
  absl::flat_hash_map<int, std::vector<IndexFlagSlot*>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<IndexFlag> IndexFlag::Begin(int device) {
  absl::StatusOr<std::shared_ptr<IndexFlagSlot>> slot = SlotPool::Get().Take(device);
  if (!slot.ok()) return slot.status();
  static_assert(kSlotBytes % 4 == 0);
  if (absl::Status s = Driver::Get().MemsetD32Async(device, (*slot)->words, 0, kSlotBytes / 4); !s.ok()) return s;
  IndexFlag flag;
  flag.slot_ = *std::move(slot);
  return flag;
}

void* IndexFlag::device_words() const { return reinterpret_cast<void*>(slot_->words); }

absl::StatusOr<PendingError::Probe> IndexFlag::End() && {
  Driver& driver = Driver::Get();
  const IndexFlagSlot& s = *slot_;
  if (absl::Status st = driver.CopyDeviceToHostAsync(s.device, s.host, s.words, kSlotBytes); !st.ok()) return st;
  if (absl::Status st = driver.RecordEvent(s.device, s.landed); !st.ok()) return st;
  return [slot = std::move(slot_)](bool wait) -> std::optional<absl::Status> {
    if (wait) waits.fetch_add(1, std::memory_order_relaxed);
    absl::StatusOr<bool> landed = Driver::Get().EventDone(slot->landed, wait);
    if (!landed.ok()) return landed.status();
    if (!*landed) return std::nullopt;
    reads.fetch_add(1, std::memory_order_relaxed);
    int64_t words[backend::kIndexCheckWords];
    for (int k = 0; k < backend::kIndexCheckWords; ++k) words[k] = slot->host[k];
    if (words[0] != 0) return absl::InvalidArgumentError(backend::IndexCheckMessage(words));
    return absl::OkStatus();
  };
}

IndexFlagCounts GetIndexFlagCounts() {
  return {.waits = waits.load(std::memory_order_relaxed), .reads = reads.load(std::memory_order_relaxed)};
}

}  // namespace fusebox::cuda
