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
