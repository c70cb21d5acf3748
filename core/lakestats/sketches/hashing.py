"""Spark SQL expressions whose ``theta_sketch_agg`` hashes values as the Iceberg Puffin spec says.

The Puffin blob ``apache-datasketches-theta-v1`` is "constructing Alpha family sketch with
default seed, and feeding it with individual distinct values converted to bytes using
Iceberg's single-value serialization" (format/puffin-spec.md). Iceberg's own writer
(spark/.../org/apache/spark/sql/stats/ThetaSketchAgg.scala) does exactly
``sketch.update(Conversions.toByteBuffer(icebergType, value))``, and DataSketches'
``update(ByteBuffer)`` hashes the buffer's remaining bytes with MurmurHash3 (seed 9001),
reading them little-endian whatever the buffer's byte order
(datasketches-java hash/MurmurHash3.hash(ByteBuffer, long)): the same hash as
``update(byte[])`` over the same bytes. Empty buffers are rejected by both, so an empty string
or binary value never enters an Iceberg NDV sketch.

Spark's ``theta_sketch_agg`` (Spark 4.1+, thetasketchesAggregates.scala) updates its sketch
per input type: BINARY → ``update(byte[])``; BIGINT → ``update(long)``, i.e. the 8
little-endian bytes; ARRAY<INT> → ``update(int[])``, i.e. 4 little-endian bytes per element;
INT → promoted to long (8 bytes, **not** the spec's 4); FLOAT → promoted to double (8 bytes,
not 4); DOUBLE → ``update(double)``, which canonicalises -0.0 to 0.0 and every NaN to one
NaN before hashing (the spec hashes the raw bits); STRING → the collation sort key (UTF-8 bytes
for the default collation). So each Iceberg type is fed as the input type whose update hashes
exactly the single-value bytes:

==============  ====================================  ==========================================
Iceberg type    single-value bytes                    Spark input fed to theta_sketch_agg
==============  ====================================  ==========================================
boolean         1 byte 0x00/0x01                      BINARY X'00' / X'01'
int             4-byte LE                             ARRAY<INT>(v)
long            8-byte LE                             BIGINT v
float           4-byte LE IEEE-754 raw bits           ARRAY<INT>(Float.floatToRawIntBits(v))
double          8-byte LE IEEE-754 raw bits           BIGINT Double.doubleToRawLongBits(v)
decimal(p, s)   unscaled, two's-complement BE,        BINARY built from the unscaled value
                minimal bytes (BigInteger)
date            4-byte LE days since epoch            ARRAY<INT>(unix_date(v))
timestamp[tz]   8-byte LE micros since epoch          BIGINT unix_micros(v)
string          UTF-8 bytes                           BINARY cast(v AS BINARY)
binary, fixed   the bytes                             BINARY v
uuid            16 bytes big-endian                   BINARY v (the Parquet FIXED[16] bytes)
==============  ====================================  ==========================================

The raw float bits come from ``java_method`` (Spark's reflection expression, evaluated in the
JVM; not a Python UDF). Spark marks it non-deterministic, and aggregate arguments must be
deterministic, so every expression here is meant for a projection *below* the aggregate:
the pipeline projects it as a column and aggregates that column. Types without an entry
(``time``, nanosecond timestamps, nested types) get no theta sketch.

``theta_hash`` is an independent pure-Python MurmurHash3_x64_128 used by tests and docs to
prove the retained hashes equal the spec's.
"""

from __future__ import annotations

from lakestats.sketches.spec import decimal_precision_scale, type_spec
from lakestats.values import is_decimal

THETA_SEED = 9001  # DataSketches' DEFAULT_UPDATE_SEED, the seed the Puffin spec requires
# The Spark SQL conf the expressions of ``theta_input_sql`` need (decimals cast BIGINT to
# BINARY, which ANSI mode refuses); every other expression here means the same either way.
ANSI_OFF = {"spark.sql.ansi.enabled": "false"}

_MASK64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_LONG_DECIMAL_DIGITS = 18  # unscaled values of up to 18 digits always fit a signed long
_DOUBLE_EXACT_DIGITS = 15  # unscaled values of up to 15 digits survive a round trip via double


def theta_input_sql(type_str: str, value_sql: str) -> str | None:
    """Spark SQL over ``value_sql`` (a column of the type's Spark read type) to project and
    then feed to ``theta_sketch_agg``; ``None`` when no spec-conformant form exists.

    NULL stays NULL (``theta_sketch_agg`` skips it). Note ``array(NULL)`` is not NULL, hence
    the explicit guards.
    """
    spec = type_spec(type_str)
    if spec is None or not spec.theta:
        return None
    t = spec.type
    v = value_sql
    if t == "boolean":
        return f"CASE WHEN {v} THEN X'01' WHEN NOT {v} THEN X'00' END"
    if t == "int":
        return f"CASE WHEN {v} IS NOT NULL THEN array({v}) END"
    if t == "long":
        return v
    if t == "float":
        bits = f"CAST(java_method('java.lang.Float', 'floatToRawIntBits', {v}) AS INT)"
        return f"CASE WHEN {v} IS NOT NULL THEN array({bits}) END"
    if t == "double":
        # java_method passes NULL to a primitive parameter as a failed task: guard it.
        bits = f"CAST(java_method('java.lang.Double', 'doubleToRawLongBits', {v}) AS BIGINT)"
        return f"CASE WHEN {v} IS NOT NULL THEN {bits} END"
    if is_decimal(t):
        return _decimal_bytes_sql(t, v)
    if t == "date":
        return f"CASE WHEN {v} IS NOT NULL THEN array(unix_date({v})) END"
    if t == "timestamp":
        # TIMESTAMP_NTZ → TIMESTAMP goes through the session time zone, which the pipeline
        # pins to UTC, so the micros are the wall-clock micros Iceberg stores.
        return f"unix_micros(CAST({v} AS TIMESTAMP))"
    if t == "timestamptz":
        return f"unix_micros({v})"
    if t == "string":
        return f"CAST({v} AS BINARY)"
    return v  # binary, fixed[n], uuid: the stored bytes are the single-value bytes


def _decimal_bytes_sql(type_str: str, v: str) -> str:
    """BigInteger.toByteArray() of the unscaled value, in Spark SQL."""
    precision, scale = decimal_precision_scale(type_str)
    if precision <= _LONG_DECIMAL_DIGITS:
        unscaled = _unscaled_long_sql(precision, scale, v)
        # BIGINT → BINARY is the 8 big-endian two's-complement bytes. Spark allows that cast
        # only with ANSI mode off (``ANSI_OFF``, which the sketch job's session sets); it is
        # ~3× cheaper per row than building the bytes from hex strings, as before.
        be8 = f"CAST({unscaled} AS BINARY)"
        return f"substring({be8}, -{_min_bytes_sql(unscaled, 8)})"
    # Up to 38 digits need 16 bytes. The multiply above could overflow Spark's decimal
    # result type here, so the unscaled digits come from the plain-string form instead.
    # to_char, not CAST AS STRING: with ANSI off that cast writes 1E-10 for small values
    digits = "0" * max(precision - scale, 1) + ("." + "0" * scale if scale else "")
    plain = f"to_char({v}, 'S{digits}')"  # sign and every digit, never an exponent
    unscaled = f"CAST(regexp_replace({plain}, '[.]', '') AS DECIMAL(38,0))"
    two64 = f"{1 << 64}BD"
    two32 = f"{1 << 32}BD"
    q = f"({unscaled} div {two64})"  # truncates toward zero
    r = f"({unscaled} - {q} * {two64})"  # in (-2^64, 2^64)
    hi = f"(CASE WHEN {r} < 0 THEN {q} - 1 ELSE {q} END)"
    lo = f"(CASE WHEN {r} < 0 THEN {r} + {two64} ELSE {r} END)"  # in [0, 2^64)
    lo_hi = f"({lo} div {two32})"
    lo_lo = f"CAST({lo} - {lo_hi} * {two32} AS BIGINT)"
    hex32 = (
        f"concat(lpad(hex({hi}), 16, '0'), lpad(hex({lo_hi}), 8, '0'), lpad(hex({lo_lo}), 8, '0'))"
    )
    body = f"substring(unhex({hex32}), -{_min_bytes_sql(unscaled, 16)})"
    return f"CASE WHEN {v} IS NOT NULL THEN {body} END"


def _unscaled_long_sql(precision: int, scale: int, v: str) -> str:
    """The unscaled value of a decimal(p ≤ 18, s) as a BIGINT, exactly."""
    if not scale:
        return f"CAST({v} AS BIGINT)"
    if precision <= _DOUBLE_EXACT_DIGITS:
        # Through a double, without Spark's BigDecimal multiply (the decimal product below
        # has 19+ digits, so Spark computes it in java.math.BigDecimal: measured, the
        # largest per-row cost of decimal hashing). Exact: |u| < 10^15 < 2^50 and Spark's
        # decimal → double is correctly rounded (java.math.BigDecimal.doubleValue), so
        # fl(fl(u / 10^s) * 10^s) is within 2^-52·|u| < 1/4 of u, and rint gives u back.
        # 10^s for s ≤ 15 is an exact double. The sketch job's KLL input is the same
        # CAST AS DOUBLE, which Spark's projection computes once for both.
        return f"CAST(rint(CAST({v} AS DOUBLE) * {10**scale}D) AS BIGINT)"
    # decimal(p,s) * 10^s has type decimal(p+s+2, s) <= decimal(38, s): exact, no
    # precision loss, and an integer, so the BIGINT cast is exact too.
    return f"CAST({v} * {10**scale}BD AS BIGINT)"


def _min_bytes_sql(unscaled_sql: str, max_bytes: int) -> str:
    """Number of bytes of the minimal two's-complement form (BigInteger.toByteArray)."""
    # BIGINT literals for a BIGINT operand: a decimal literal would turn every comparison
    # into Decimal arithmetic, several times slower per row.
    suffix = "L" if max_bytes <= 8 else "BD"
    arms = []
    for n in range(1, max_bytes):
        bound = 1 << (8 * n - 1)
        arms.append(
            f"WHEN {unscaled_sql} BETWEEN -{bound}{suffix} AND {bound - 1}{suffix} THEN {n}"
        )
    return f"(CASE {' '.join(arms)} ELSE {max_bytes} END)"


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def murmur3_x64_128(data: bytes, seed: int = THETA_SEED) -> tuple[int, int]:
    """MurmurHash3_x64_128 of ``data`` (the hash DataSketches uses), as two unsigned longs."""
    h1 = h2 = seed & _MASK64
    n_blocks = len(data) // 16
    for i in range(n_blocks):
        k1 = int.from_bytes(data[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8 : 16 * i + 16], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 = (((_rotl(h1, 27) + h2) & _MASK64) * 5 + 0x52DCE729) & _MASK64
        h2 ^= (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 = (((_rotl(h2, 31) + h1) & _MASK64) * 5 + 0x38495AB5) & _MASK64
    tail = data[16 * n_blocks :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1, h2


def theta_hash(data: bytes, seed: int = THETA_SEED) -> int | None:
    """The 63-bit hash a theta sketch retains for ``data``; ``None`` for empty input, which
    DataSketches' ``update(byte[])``/``update(ByteBuffer)`` reject."""
    if not data:
        return None
    return murmur3_x64_128(data, seed)[0] >> 1
