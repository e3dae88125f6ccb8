//===- cpu_transport.cpp - libpipert_cpu's transport: MPI ------------------===//
#include "mpi_transport.h"

pipert::Transport &pipert::activeTransport() {
  static MpiTransport transport;
  return transport;
}
