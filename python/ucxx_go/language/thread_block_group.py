"""Thread-block groups: one op split over several lanes (tbg_info)."""

from __future__ import annotations

from ._ir import dsl_call

__all__ = ["ThreadBlockGroup"]


class ThreadBlockGroup:
    """Lanes that share an op: lane tb_list[i] handles slice i of every reference."""

    @dsl_call
    def __init__(self, tb_list):
        self.tb_list = list(tb_list)
        if not self.tb_list:
            raise ValueError("a thread-block group needs at least one thread block")
        self._tb_id = {}
        for i, tb in enumerate(self.tb_list):
            if tb in self._tb_id:
                raise ValueError(f"thread block {tb} twice in a group")
            self._tb_id[tb] = i

    def get_internal_id(self, tb):
        if tb not in self._tb_id:
            raise ValueError(f"thread block {tb} is not in the group")
        return self._tb_id[tb]

    def numtb(self):
        return len(self.tb_list)
