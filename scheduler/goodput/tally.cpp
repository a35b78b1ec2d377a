#include "scheduler/goodput/tally.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "host/error.hpp"
#include "scheduler/goodput/event.hpp"

namespace sdc::goodput {

Tally tally_files(const std::vector<std::string>& paths, bool lenient) {
  Tally tally;
  std::vector<int64_t> faults, step_ends;
  int64_t most_saves = 0;
  for (const std::string& path : paths) {
    if (std::filesystem::is_directory(path)) throw InputError(path + ": is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot read " + path);
    // The begin time of each open activity of this file; -1 when none is open.
    int64_t save_begin = -1, wait_begin = -1, eval_begin = -1, probe_begin = -1;
    int64_t saves = 0, first_save_end = 0, last_save_end = 0;
    auto close = [](int64_t& begin, int64_t t, Activity& a) {
      if (begin < 0) return;
      ++a.count;
      a.ns += t - begin;
      begin = -1;
    };
    EventReader reader(lenient);
    try {
      reader.read(in, [&](const Event& e) {
        switch (e.kind) {
          case EventKind::kCkptBegin: save_begin = e.t; break;
          case EventKind::kCkptEnd:
            if (save_begin >= 0) {
              if (saves++ == 0) first_save_end = e.t;
              last_save_end = e.t;
            }
            close(save_begin, e.t, tally.saves);
            break;
          case EventKind::kDataWaitBegin: wait_begin = e.t; break;
          case EventKind::kDataWaitEnd: close(wait_begin, e.t, tally.data_waits); break;
          case EventKind::kEvalBegin: eval_begin = e.t; break;
          case EventKind::kEvalEnd: close(eval_begin, e.t, tally.evals); break;
          case EventKind::kProbeBegin: probe_begin = e.t; break;
          case EventKind::kProbeEnd: close(probe_begin, e.t, tally.probes); break;
          case EventKind::kStepEnd: step_ends.push_back(e.t); break;
          case EventKind::kFaultDetected:
          case EventKind::kSdcDetected:
            faults.push_back(e.t);
            // A fault ends what was running; a late end from the dying process is not a duration.
            save_begin = wait_begin = eval_begin = probe_begin = -1;
            break;
          default: break;
        }
      });
    } catch (const InputError& e) {
      throw InputError(path + ": " + e.what());
    }
    if (saves > most_saves) {
      most_saves = saves;
      tally.save_interval_ns = saves > 1 ? (last_save_end - first_save_end) / (saves - 1) : 0;
    }
  }
  std::sort(faults.begin(), faults.end());
  std::sort(step_ends.begin(), step_ends.end());
  for (size_t i = 0; i < faults.size(); ++i) {
    // A new incident unless the previous report came after the last step that ended before this one.
    const auto last_step = std::upper_bound(step_ends.begin(), step_ends.end(), faults[i]);
    const bool progressed = last_step != step_ends.begin() && *(last_step - 1) > (i > 0 ? faults[i - 1] : -1);
    if (i == 0 || progressed) ++tally.incidents;
  }
  return tally;
}

}  // namespace sdc::goodput
