//===- mpi_rename.h - the MPI transport under pipert_mpi_* names -*- C++ -*-===//
//
// Force-included (-include) into runtime/cpu/comm/mpi_comm.cpp when it is compiled
// into libpipert_cuda: the CPU backend's MPI transport then defines
// pipert_mpi_send, pipert_mpi_comm, ... instead of the public names, and the
// NCCL transport (nccl_comm.cpp) implements the public pipert_comm.h on top of
// it (start-up, groups, barriers, timeouts, the ncclUniqueId broadcast) without
// a second copy of that code. mpi_unrename.h undoes it.
//
//===----------------------------------------------------------------------===//
#define pipert_allreduce_f32 pipert_mpi_allreduce_f32
#define pipert_barrier pipert_mpi_barrier
#define pipert_broadcast pipert_mpi_broadcast
#define pipert_comm_destroy pipert_mpi_comm_destroy
#define pipert_comm_finalize pipert_mpi_comm_finalize
#define pipert_comm_init pipert_mpi_comm_init
#define pipert_comm_initialized pipert_mpi_comm_initialized
#define pipert_comm_max_tag pipert_mpi_comm_max_tag
#define pipert_comm_pipeline_group pipert_mpi_comm_pipeline_group
#define pipert_comm_rank pipert_mpi_comm_rank
#define pipert_comm_set_timeout pipert_mpi_comm_set_timeout
#define pipert_comm_size pipert_mpi_comm_size
#define pipert_comm_split pipert_mpi_comm_split
#define pipert_comm_stage_group pipert_mpi_comm_stage_group
#define pipert_comm_timeout pipert_mpi_comm_timeout
#define pipert_comm_world pipert_mpi_comm_world
#define pipert_comm_world_rank_of pipert_mpi_comm_world_rank_of
#define pipert_iallreduce_f32 pipert_mpi_iallreduce_f32
#define pipert_irecv pipert_mpi_irecv
#define pipert_isend pipert_mpi_isend
#define pipert_recv pipert_mpi_recv
#define pipert_send pipert_mpi_send
#define pipert_test pipert_mpi_test
#define pipert_wait pipert_mpi_wait
#define pipert_wait_all pipert_mpi_wait_all
#define pipert_world_rank pipert_mpi_world_rank
#define pipert_comm pipert_mpi_comm
#define pipert_request pipert_mpi_request
#define pipert_collective_op pipert_mpi_collective_op
#define PIPERT_COLLECTIVE_SUM PIPERT_MPI_COLLECTIVE_SUM
#define PIPERT_COLLECTIVE_MEAN PIPERT_MPI_COLLECTIVE_MEAN
