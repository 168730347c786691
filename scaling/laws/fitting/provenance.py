"""Where a fit's points came from, typed: what a later command needs to load them again.

    Provenance("runs", "runs/tiny")          # a run store, as the path was given
    Provenance("dataset", "chinchilla")      # a packaged dataset, by name
    Provenance("table", "points.csv")        # a CSV or parquet table (its columns: fit.json's data.table)

The loaders (`scaling.laws.fitting.fitdata`) set it on the points; fit.json records it as
data.provenance = {"kind", "location"} beside data.source, which stays the words a person reads.
A fit.json written before provenance was recorded has only those words: `from_source` reads them
once, here, so no other module parses a source string.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("runs", "dataset", "table")


@dataclass(frozen=True)
class Provenance:
    """kind: "runs", "dataset" or "table"; location: the store's path as given, the dataset's name
    or the table's path."""

    kind: str
    location: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "location": self.location}

    @classmethod
    def from_json(cls, obj: object) -> Provenance | None:
        """From fit.json's data.provenance; None for anything but a known kind and a text location."""
        if not isinstance(obj, dict) or obj.get("kind") not in KINDS or not isinstance(obj.get("location"), str):
            return None
        return cls(obj["kind"], obj["location"])

    @classmethod
    def from_source(cls, source: str | None) -> Provenance | None:
        """From the data.source words of an older fit.json ("runs PATH", "dataset NAME: what it
        is", "table PATH"); None for any other source (simulated points, a data frame)."""
        kind, _, rest = (source or "").partition(" ")
        if kind not in KINDS or not rest:
            return None
        return cls(kind, rest.split(":", 1)[0].strip() if kind == "dataset" else rest)
