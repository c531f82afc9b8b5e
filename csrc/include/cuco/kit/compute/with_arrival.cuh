// A CUTLASS collective mainloop that carries where its operands come from: `Base` with an `arrival` field added to
// its Arguments and its Params, copied through to_underlying_arguments. The mainloops that wait for rows or keys
// to land (row_arrival.cuh, fmha_arrival.cuh, GEMM+AllGather's arrival GEMM) derive from it and override only their
// loads.
#pragma once

namespace cuco::kit {

template <class Base, class Arrival>
struct WithArrival : Base {
  struct Arguments : Base::Arguments {
    Arrival arrival{};
  };
  struct Params : Base::Params {
    Arrival arrival{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shape, args, workspace);
    p.arrival = args.arrival;
    return p;
  }
};

}  // namespace cuco::kit
