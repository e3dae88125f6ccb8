//===- mpi_unrename.h - undoes mpi_rename.h ----------------------*- C++ -*-===//
//
// After including pipert_comm.h under the renamed names, this lets the same
// translation unit include it again for the public ABI.
//===----------------------------------------------------------------------===//
#undef pipert_allreduce_f32
#undef pipert_barrier
#undef pipert_broadcast
#undef pipert_comm_destroy
#undef pipert_comm_finalize
#undef pipert_comm_init
#undef pipert_comm_initialized
#undef pipert_comm_max_tag
#undef pipert_comm_pipeline_group
#undef pipert_comm_rank
#undef pipert_comm_set_timeout
#undef pipert_comm_size
#undef pipert_comm_split
#undef pipert_comm_stage_group
#undef pipert_comm_timeout
#undef pipert_comm_world
#undef pipert_comm_world_rank_of
#undef pipert_iallreduce_f32
#undef pipert_irecv
#undef pipert_isend
#undef pipert_recv
#undef pipert_send
#undef pipert_test
#undef pipert_wait
#undef pipert_wait_all
#undef pipert_world_rank
#undef pipert_comm
#undef pipert_request
#undef pipert_collective_op
#undef PIPERT_COLLECTIVE_SUM
#undef PIPERT_COLLECTIVE_MEAN
#undef PIPERT_PIPERT_COMM_H
