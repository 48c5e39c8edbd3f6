// Golden-value generator: runs the REAL MSCCL++ v0.9.0 plan parser
// (src/core/executor/execution_plan.cc at tag v0.9.0, commit ed565ceb) on one
// (plan, rank, inputBytes, outputBytes) and prints what it computes, one TSV line
// per flattened op. Built by gen.sh against /work/notes/parser-harness's stub
// headers; not part of the Go build (testdata is ignored by go).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mscclpp/core.hpp>
#include <mscclpp/executor.hpp>
#include <mscclpp/utils.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "execution_common.hpp"
#define private public  // read the parser's private arithmetic (getOffset, ...)
#include "execution_plan.hpp"
#undef private
using namespace mscclpp;
static const char* opn(OperationType t) {
  static const char* n[] = {"nop", "barrier", "put", "ppkt", "rppkt", "pws", "pwsf", "get", "copy", "cpkt",
                            "upkt", "signal", "wait", "flush", "re", "repkt", "recpkt", "res", "respkt", "recspkt",
                            "rre", "rres", "glres", "rlxsignal", "rlxwait", "pipeline", "sem_release", "sem_acquire"};
  return n[(int)t];
}
int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s name plan.json rank inputBytes outputBytes\n", argv[0]);
    return 2;
  }
  const char* name = argv[1];
  int rank = atoi(argv[3]);
  size_t in = strtoull(argv[4], 0, 10), out = strtoull(argv[5], 0, 10);
  printf("case\t%s\t%d\t%zu\t%zu\t", name, rank, in, out);
  fflush(stdout);
  try {
    ExecutionPlan::Impl p(argv[2], rank);
    p.loadExecutionPlan(in, out, 0, 0);
    size_t chunk = p.getOffset(in, out, 1) - p.getOffset(in, out, 0);
    size_t scratch = p.calScratchBufferSize(std::min(in, p.maxMessageSize), std::min(out, p.maxMessageSize));
    printf("ok\tchunk=%zu\tscratch=%zu\tslot=%zu\n", chunk, scratch, p.calMaxScratchChunkSize(scratch));
    for (int tb = 0; tb < p.getThreadblockCount(); tb++) {
      auto ops = p.getOperations(tb);
      for (size_t i = 0; i < ops.size(); i++) {
        const Operation& op = ops[i];
        printf("op\t%d\t%zu\t%s", tb, i, opn(op.type));
        switch (op.type) {
          case OperationType::PIPELINE:
            printf("\titer=%u\tunit=%u\tn=%u\n", op.nIterations, op.unitSize, op.nOperations);
            continue;
          case OperationType::BARRIER:
            printf("\tbarrier=%u\tcount=%u\n", op.deviceSyncerIndex, op.nThreadBlocks);
            continue;
          case OperationType::SEM_ACQUIRE:
          case OperationType::SEM_RELEASE:
            printf("\tsems=%u\n", op.nDeviceSemaphores);
            continue;
          default:
            break;
        }
        printf("\tsrc=");
        for (int k = 0; k < op.nInputs; k++) printf("%s%u:%u", k ? "," : "", op.inputOffsets[k], op.inputBufferSizes[k]);
        printf("\tdst=");
        for (int k = 0; k < op.nOutputs; k++) printf("%s%u:%u", k ? "," : "", op.outputOffsets[k], op.outputBufferSizes[k]);
        printf("\n");
      }
    }
  } catch (const std::exception& e) {
    printf("err\t%s\n", e.what());
    return 1;
  }
  return 0;
}
