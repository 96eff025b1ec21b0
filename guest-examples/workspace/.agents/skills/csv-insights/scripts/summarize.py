"""Summarise CSV text given as {"csv": "..."} on stdin; print a JSON summary."""
import csv
import io
import json
import sys
from collections import Counter


def column_type(values):
    kinds = set()
    for value in values:
        try:
            int(value)
            kinds.add("integer")
            continue
        except ValueError:
            pass
        try:
            float(value)
            kinds.add("number")
        except ValueError:
            return "text"
    if kinds == {"integer"}:
        return "integer"
    return "number" if kinds else "text"


def summarize(text):
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {"rows": 0, "columns": []}
    header, body = rows[0], rows[1:]
    columns = []
    for index, name in enumerate(header):
        cells = [row[index] if index < len(row) else "" for row in body]
        present = [cell for cell in cells if cell.strip()]
        kind = column_type(present)
        column = {"name": name, "type": kind, "missing": len(cells) - len(present)}
        if kind in ("integer", "number") and present:
            numbers = [float(cell) for cell in present]
            column["min"], column["max"] = min(numbers), max(numbers)
        else:
            column["top"] = [value for value, _ in Counter(present).most_common(3)]
        columns.append(column)
    return {"rows": len(body), "columns": columns}


if __name__ == "__main__":
    request = json.load(sys.stdin)
    json.dump(summarize(request["csv"]), sys.stdout)
    sys.stdout.write("\n")
