// Built without MPI: --comm mpi says what is missing.
#include "host/communicator.hpp"
#include "host/error.hpp"

namespace sdc {

bool mpi_compiled() { return false; }

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw InputError(
      "--comm mpi: this sdcprobe was built without MPI; install libopenmpi-dev (scripts/install-deps.sh) and "
      "rebuild");
}

}  // namespace sdc
