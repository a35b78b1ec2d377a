// Error types shared by every layer. Corruption is never an exception: it is data in a result.
#pragma once

#include <stdexcept>
#include <string>

namespace sdc {

// Bad input from the operator (arguments, files, specs). The CLI reports it and exits 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The requested backend or device is not available on this machine (still exit 2 for the CLI).
class NoDeviceError : public InputError {
 public:
  using InputError::InputError;
};

// A failure of something the test depends on, outside the device under test: a library (NCCL,
// NVML) or a child's protocol. The CLI exits 2, "could not test", naming cause() (describe_error).
class DependencyError : public std::runtime_error {
 public:
  DependencyError(const char* cause, const std::string& message) : std::runtime_error(message), cause_(cause) {}
  const char* cause() const { return cause_; }

 private:
  const char* cause_;
};

class NcclError : public DependencyError {
 public:
  explicit NcclError(const std::string& message) : DependencyError("NCCL", message) {}
};

class NvmlError : public DependencyError {
 public:
  explicit NvmlError(const std::string& message) : DependencyError("NVML", message) {}
};

// A line from a worker (or a `devices --protocol-fd` child) that is not the worker protocol.
class WorkerProtocolError : public DependencyError {
 public:
  explicit WorkerProtocolError(const std::string& message) : DependencyError("worker protocol", message) {}
};

// What went wrong, for an operator: "<cause> error: <message>" for a DependencyError.
inline std::string describe_error(const std::exception& e) {
  const auto* dependency = dynamic_cast<const DependencyError*>(&e);
  return dependency == nullptr ? e.what() : std::string(dependency->cause()) + " error: " + e.what();
}

// A backend API failure (allocation, launch, library). `sticky` means the device context is
// unusable (illegal address, ECC, launch failure) and the device must be retested in a fresh process.
// code() is in the numbering of source(): cuBLAS statuses and cudaError codes overlap (1 is both
// CUBLAS_STATUS_NOT_INITIALIZED and cudaErrorInvalidValue), so a code means nothing without it.
class CudaError : public std::runtime_error {
 public:
  enum class Source { kRuntime, kCublas };

  CudaError(int code, bool sticky, const std::string& expression, const char* file, int line,
            const std::string& message, Source source = Source::kRuntime)
      : std::runtime_error(message + " (" + expression + " at " + file + ":" + std::to_string(line) + ")"),
        code_(code),
        sticky_(sticky),
        source_(source) {}
  int code() const { return code_; }
  Source source() const { return source_; }
  bool sticky() const { return sticky_; }

 private:
  int code_;
  bool sticky_;
  Source source_;
};

}  // namespace sdc
