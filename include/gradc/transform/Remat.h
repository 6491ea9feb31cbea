//===- Remat.h - checkpoint rematerialization (SPEC §6) -------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <functional>
#include <string>
#include <vector>

namespace gradc {

struct RematStats {
  int segments = 0;   // checkpoint segments found
  int recomputed = 0; // bindings duplicated into the backward pass
  int time_checkpointed = 0; // scans whose backward pass keeps every k-th state
  int64_t extra_flops = 0;   // the FLOPs of the copies (expr_flops)
  std::vector<std::string> recomputed_values; // the Vars copied, each once, in order of first copy
  std::string strategy; // the plan auto or sqrt chose (AutoRemat.h); empty otherwise
  int plans = 0;              // the plans auto or sqrt chose from
  double solver_seconds = -1; // the time taken to make and measure them (-1: no search)
};

/// What rematerialization recomputes, one flag per binding of a function
/// body. A dropped binding's value is not kept: the bindings that read
/// originals read it as computed, and every other use reads a copy
/// recomputed right before the first such use (from the originals of kept
/// values and, recursively, copies of dropped ones). The copies are shared
/// by every later use, and the originals die at their last original read.
struct RematSet {
  std::vector<bool> dropped;
  std::vector<bool> reads_original;
};

/// The general form: which bindings read originals, and which bindings are
/// recomputed right before each binding j (before[j], in order; before[n]
/// before the result). Every binding that does not read originals, and
/// every copy, reads the latest instance of each value: the original until
/// a copy is made, then that copy until the next. So a value may be
/// recomputed several times (binomial checkpointing recomputes a step once
/// per sweep), and an instance dies at its last read.
struct RematSchedule {
  std::vector<bool> reads_original;
  std::vector<std::vector<size_t>> before; // n + 1 lists
};

/// The schedule of a set: each dropped value copied once, right before its
/// first read by a binding (or the result) that does not read originals,
/// after the copies of the dropped values it reads.
RematSchedule schedule_of(const Function &fn, const RematSet &set);

/// The one definition of a checkpoint segment (Relax's semantics; `gradc ops
/// grad.start_checkpoint` states its rules), over the bindings of an ANF or
/// a fused body. A binding is downstream of an opening start when it is the
/// start, or reads (inside fused calls and `fn` bodies too) a value
/// downstream of one that is not an end's; it is upstream of an end when an
/// end reads it, or a binding upstream of an end that is not a start reads
/// it. The segment is what is both, starts excluded. `opens(i)`: whether
/// start binding i opens a segment (every start for rematerialization, a
/// live one for dead-code elimination, which keeps the ends it reaches).
struct CheckpointReach {
  std::vector<bool> from_start, to_end;
  std::vector<bool> segment() const;
};
CheckpointReach checkpoint_reach(const Function &fn, const std::function<bool(size_t)> &opens);

/// Selection by markers (--remat=manual, Relax semantics). A checkpoint
/// segment is every binding on a path from a grad.start_checkpoint output to
/// a grad.end_checkpoint input: its bindings are dropped, and they and the
/// end markers read originals. Deciding what is inside is purely structural,
/// so a dumped and re-parsed adjoint is selected the same way.
RematSet checkpoint_segments(const Function &fn, RematStats &stats);

/// Rewriting: recomputes what `set` drops, as RematSet says. Works on ANF
/// and on fused bodies alike (a copy is the whole binding, its nested calls
/// included). Pre: `set` has one flag per binding. Post: the same results,
/// bitwise (a copy runs the same operators on the same values). With
/// `source`, source[j] is the binding of `fn` that binding j of the result
/// is, or copies (whose footprint it has: transform/MemoryModel.h).
FunctionPtr rematerialize(const Function &fn, const RematSet &set, RematStats &stats,
                          std::vector<size_t> *source = nullptr);
/// The same for a schedule (rematerialize(fn, set) is this of schedule_of).
FunctionPtr rematerialize(const Function &fn, const RematSchedule &schedule, RematStats &stats,
                          std::vector<size_t> *source = nullptr);

/// Both: manual rematerialization of the checkpoint segments.
FunctionPtr rematerialize_checkpoints(const Function &fn, RematStats &stats);

/// Time checkpointing (also --remat=manual): every grad.scan_backward of a
/// scan written with checkpoint_every=k > 1 reads only every k-th state and
/// recomputes the rest (transform/TimeCheckpoint.cpp). Pre and post: typed
/// ANF, bitwise the same results.
FunctionPtr checkpoint_scans(const Function &fn, RematStats &stats);

} // namespace gradc
