package plan

// Plans with per-call block sizes (our extension "ucxxgo_variable_blocks", for
// alltoallv; MSCCL++'s parser ignores the key): chunk j of each rank's input and
// output is block j, whose byte offset and length every call gives, per rank.
// Such a plan is out of place, Simple, with n input and output chunks per rank,
// no scratch, and every reference names exactly one block of an input or output
// buffer, whole (no thread-block groups, no pipelines).

func checkVariableBlocks(p *Plan) error {
	n := len(p.Ranks)
	if p.InPlace || p.UsesPackets() {
		return nowhere.at("ucxxgo_variable_blocks").errf(ErrMalformed, "per-call blocks need an out-of-place Simple plan")
	}
	for r := range p.Ranks {
		rk := &p.Ranks[r]
		w := rankWhere(r)
		if rk.InputChunks != n || rk.OutputChunks != n || rk.ScratchChunks != 0 {
			return w.errf(ErrMalformed, "per-call blocks need %d input and output chunks and no scratch, not %d, %d and %d",
				n, rk.InputChunks, rk.OutputChunks, rk.ScratchChunks)
		}
		for li := range rk.Lanes {
			for oi := range rk.Lanes[li].Ops {
				op := &rk.Lanes[li].Ops[oi]
				wo := w.at("threadblocks").idx(li).at("ops").idx(oi)
				wo.lane, wo.op = li, oi
				if op.Code == OpPipeline || op.Group.Size > 1 {
					return wo.errf(ErrMalformed, "per-call blocks take no pipelines or thread-block groups")
				}
				for _, refs := range [][]BufferRef{op.Src, op.Dst} {
					for _, ref := range refs {
						if ref.Kind == RefSwitch || ref.Buffer == BufferScratch || ref.Size != 1 {
							return wo.errf(ErrMalformed, "with per-call blocks a reference names one input or output block")
						}
					}
				}
			}
		}
	}
	return nil
}
