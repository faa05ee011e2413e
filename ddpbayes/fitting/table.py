"""Reading a data table for a fit (DESIGN §9): CSV, or Parquet with pyarrow, with pandas; only the
columns a template names, at most `max_rows` rows, every problem one line of bad input."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_positive_int, count_text

DEFAULT_MAX_ROWS = 1_000_000  # rows read before a table is refused (--max-rows)


def read_table(path: str | Path, text_columns: Sequence[str], number_columns: Sequence[str],
               max_rows: int = DEFAULT_MAX_ROWS):
    """The columns of `path` a template needs, as a pandas DataFrame in the file's row order:
    `text_columns` as strings (cluster labels), `number_columns` as numbers. At most `max_rows`
    + 1 rows are read, so a huge file is refused before it is read whole."""
    import pandas as pd

    check_positive_int(max_rows, "--max-rows")
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file '{path}' does not exist or is not a regular file")
    wanted = list(dict.fromkeys([*text_columns, *number_columns]))
    header = _header(path)
    missing = [c for c in wanted if c not in header]
    if missing:
        shown = ", ".join(f"'{c}'" for c in header[:20]) + (" ..." if len(header) > 20 else "")
        raise InputError(f"column '{missing[0]}' is not in '{path}' (its columns: {shown})")
    if path.suffix.lower() == ".parquet":
        table = _read_parquet(path, wanted, max_rows)
    else:
        try:
            table = pd.read_csv(path, usecols=wanted, dtype={c: str for c in text_columns}, nrows=max_rows + 1,
                                keep_default_na=True)
        except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InputError(f"data file '{path}' cannot be read as CSV: {' '.join(str(exc).split())}") from None
    if len(table) > max_rows:
        raise InputError(f"data file '{path}' has more than {count_text(max_rows)} rows (raise --max-rows to fit it)")
    if len(table) == 0:
        raise InputError(f"data file '{path}' has no data rows")
    for column in wanted:
        _check_complete(table[column], column, path)
    for column in number_columns:
        if column not in text_columns:
            _check_numeric(table[column], column, path)
    return table


def columns_of(path: str | Path) -> list[str]:
    """The column names of the table at `path` (CSV or Parquet), read without its rows."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file '{path}' does not exist or is not a regular file")
    return _header(path)


def _header(path: Path) -> list[str]:
    """The table's column names, read without reading its rows."""
    if path.suffix.lower() == ".parquet":
        return list(_parquet_file(path).schema_arrow.names)
    import pandas as pd

    try:
        return list(pd.read_csv(path, nrows=0).columns)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"data file '{path}' cannot be read as CSV: {' '.join(str(exc).split())}") from None


def _parquet_file(path: Path):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"reading '{path}' (Parquet) needs pyarrow: pip install 'ddpbayes[parquet]', "
                         "or give a CSV file") from None
    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's errors for a damaged file have no common base but Exception
        raise InputError(f"data file '{path}' cannot be read as Parquet: {exc}") from None


def _read_parquet(path: Path, columns: list[str], max_rows: int):
    """A Parquet table's columns, its size read from the footer before any row."""
    file = _parquet_file(path)
    if file.metadata.num_rows > max_rows:
        raise InputError(f"data file '{path}' has {count_text(file.metadata.num_rows)} rows, over the limit of "
                         f"{count_text(max_rows)} (raise --max-rows to fit it)")
    return file.read(columns=columns).to_pandas()


def _check_complete(values, column: str, path: Path) -> None:
    """No missing value (an empty field, NA, NaN) in `column`."""
    missing = np.flatnonzero(values.isna().to_numpy())
    if missing.size:
        raise InputError(f"column '{column}' of '{path}' has {missing.size:,} missing value(s), the first in data "
                         f"row {missing[0] + 1}: drop or impute them before fitting")


def _check_numeric(values, column: str, path: Path) -> None:
    """`column` holds numbers (or booleans), all finite."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    if is_bool_dtype(values.dtype):
        return
    if not is_numeric_dtype(values.dtype):
        bad = next(v for v in values if not _is_number(v))
        raise InputError(f"column '{column}' of '{path}' must hold numbers: it holds '{str(bad)[:40]}'")
    finite = np.isfinite(values.to_numpy(dtype=float))
    if not finite.all():
        raise InputError(f"column '{column}' of '{path}' has an infinite value in data row "
                         f"{np.flatnonzero(~finite)[0] + 1}")


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
