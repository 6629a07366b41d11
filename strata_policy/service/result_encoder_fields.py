"""What ``service.result_encoder``'s byte writers write of each field, checked at import.

The declarations (``service.field_coverage``'s ``FieldMap``) of the encoder's two writers of
``WorkloadResult`` and of the ``Placement`` fragments both write: for each field of the message,
the value field it is written from, or that it is ``Fixed`` or ``Delegated`` to
``convert.fill_result``. ``FieldMap.check`` runs when this module is imported (the encoder
imports it), so a field added to the ``.proto`` or to ``model.WorkloadResult`` /
``placement.outputs.PlacedColumns`` / ``model.Placement`` that a writer does not account for
fails the server's start and every test; ``tests/test_field_coverage.py`` ties each
declaration to what its writer does, on values with every field set.

They live beside the encoder rather than in it because they only run at import: the encoder is
on the Place path (``tests/test_place_path.py``), and reads from here only
``PLACEMENT_COPIED``, the placement fields it copies.
"""

from __future__ import annotations

from strata.policy.v1 import types_pb2 as pb

from strata_policy import model
from strata_policy.placement.outputs import PlacedColumns
from strata_policy.service.field_coverage import Delegated, FieldMap, Fixed, same

PLACEMENT_FIELDS = FieldMap(
    "result_encoder._placement",
    pb.Placement,
    model.Placement,
    same("node_id", "gpu_devices"),
)
PLACEMENT_COPIED = PLACEMENT_FIELDS.copied()
"""(message field, value field) of each placement field a fragment copies, read once: the
encoder's ``_placement`` runs per new placement."""
VALUE_WRITER_FIELDS = FieldMap(
    "result_encoder._write_results",
    pb.WorkloadResult,
    model.WorkloadResult,
    {
        "workload_id": "workload_id",
        "decision": "decision",
        "placements": "placements",
        "reasons": Delegated("convert.fill_result"),
        "borrowed": "borrowed",
        "victims": Delegated("convert.fill_result"),
        "score": "score",
        "explanation": "explanation",
    },
    nested=(PLACEMENT_FIELDS,),
).check()
"""What the value writer (``response_bytes``; the tests' ``add_results``) writes itself, and
what it leaves to ``convert.fill_result`` (a result with reasons or victims is built field by
field)."""
COLUMN_WRITER_FIELDS = FieldMap(
    "result_encoder._write_columns",
    pb.WorkloadResult,
    PlacedColumns,
    {
        "workload_id": "ids",
        "decision": Fixed("PLACED"),
        "placements": "placements",
        "reasons": Fixed("none: a PlacedColumns row has none"),
        "borrowed": "borrowed",
        "victims": Fixed("none: a PlacedColumns row has none"),
        "score": "scores",
        "explanation": Fixed("none: a PlacedColumns row has none"),
    },
    nested=(PLACEMENT_FIELDS,),
).check()
"""What the column writer (``columnar_bytes``) reads from a ``PlacedColumns`` run for each field."""
