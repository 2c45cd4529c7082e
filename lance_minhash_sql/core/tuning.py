"""Tuning constants: the numbers chosen for speed or memory, each named and explained once.

Formats and limits live elsewhere (``core/lance_format.py``: Lance's file format;
``core/params.py``: parameter rules). What is here changes how fast the package runs and
how much memory it takes, never an answer: the tests run with other values of many of
these (by setting the attribute of the module that uses them) and get the same results.
Many were measured on a 2-core development machine (pylance 14.0.2, local disk); the
comment says what each was measured against.
"""

from __future__ import annotations

from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES

# ------------------------------- Reading index files: the cost model of the search and the self-join (index/entries.py)

# Read cost model (measured on the 2-core development machine, pylance 14.0.2, local
# disk): one read_range / take_rows call costs 0.3-0.7 ms before its bytes; whole-file
# reads stream at 160-220 MB/s.
READ_CALL_SECONDS = 5e-4
READ_BYTES_PER_SECOND = 180e6
# Object stores: a round trip of tens of milliseconds (S3 first byte: 10-50 ms) and one
# stream at about 100 MB/s. Remote segments charge the estimates, not the measured time,
# to the ski rental below, so a slow store cannot make a whole-file read look cheap.
REMOTE_READ_CALL_SECONDS = 0.03
REMOTE_READ_BYTES_PER_SECOND = 100e6
# A local file read through its memory map (io/mapped.py): a gather, no call into Lance.
MAPPED_READ_CALL_SECONDS = 2e-5
PAGE_GAP = 3  # read up to 2 unneeded pages rather than make another call
WINDOW_ROWS = 256  # rows fetched around a cold bucket's predicted position (error ~32 rows)
WINDOW_MAX_ROWS = 1 << 16  # above this many window rows a batch reads pages instead
TAKE_ROW_SECONDS = 2e-5  # signatures.lance take_rows: 30 us a row for tens, 12 us for 10,000
FIRST_STORE_PAGES = 64  # band pages a segment's store holds when it is first grown (index/stores.py)
FIRST_STORE_DOCS = 1024  # docs a segment's store holds when it is first grown (index/stores.py)
# Reads of more rows than this go through Lance's reader even where the memory map could
# serve them (io/segments.py): Lance decodes without holding the GIL, so a self-join's
# shards load in parallel and a closing stream is not kept waiting; a query's windows,
# pages and candidates are far fewer rows.
MAPPED_MAX_ROWS = 1 << 16
TAIL_READ_BYTES = 64 << 10  # bytes read from a file's end at once (Lance's own reader reads as much; io/lancefile.py)
CHUNK_READ_WORKERS = 16  # threads that run an object store's ranged reads concurrently (io/chunks.py)
MAX_DOCS_PER_RUN = 8  # a segment with fewer docs per row-id run on average keeps no runs (index/rowid_runs.py)
ROWID_BLOCK_ROWS = 1 << 20  # row ids read per block while building a segment's row-id runs
PREWARM_READ_DOCS = 1 << 16  # signatures a prewarm reads per call (lifecycle/prewarm.py)


def whole_read_pays(rent: float, partial: float, whole: float) -> bool:
    """Ski rental: read a file whole once the time spent on partial reads (``rent``, measured)
    plus this read's estimate (``partial``) reaches the estimate of one whole read."""
    return rent + partial >= whole

# ----------------------------------------------------------------------------- The search engine policy (query/engine.py)

# What loading numba costs a process (its import, its runtime and the kernels' cache loads,
# kernels/config.py: about a third of a second of CPU): the ski rental's price in
# query/engine.py and index/numpy_sign.py.
KERNEL_LOAD_SECONDS = 0.35

# ------------------------------------------------------------------- The numpy engine of a few queries (query/probe.py)

MAX_CANDIDATES = 1 << 17  # bucket rows above which the kernels are faster (even counting numba's load)
FANOUT = 64  # keys read per lane and step of numpy's bucket search (kernels/gather.py; a 4,096-row page: two steps)
END_ROWS = 8  # rows read from a bucket's start for its end (most buckets hold a row or two)

# ------------------------------ Signing with numpy (index/numpy_sign.py; a few queries: query/query_sign.py)

# CPU seconds per byte of text of signing with numpy (index/numpy_sign.py: Lance's tokenizer,
# the shingles' XXH64 and minima in numpy): its estimate in the ski rental against KERNEL_LOAD_SECONDS
NUMPY_SIGN_SECONDS_PER_BYTE = 150e-9
FEW_RANGES = 256  # fewer byte ranges than this are hashed one by one by the xxhash package (index/numpy_sign.py)
NUMPY_BAND_KEY_SECONDS = 100e-9  # CPU seconds per band key by numpy (index/numpy_sign.py: band_keys_numpy)
MAX_QUERIES = 16  # more queries than this are signed (and searched) by the numba kernels
MAX_TEXT_CHARS = 1 << 16  # a longer text is signed by the numba kernels (a shingle costs ~0.3 us there)
SHINGLE_BLOCK = 8192  # shingles per block of the numpy minima (a block holds k x 8192 uint64: 8 MiB at k = 128)

# ---------------------------------------------------------------------------------- Batches of queries (kernels/lsh.py)

# Batches below this run the serial drivers. Measured on 2 cores, 1,000 queries against a
# 1M-row segment in memory: 19 ms parallel vs 24 ms serial on an idle machine, 90 ms vs
# 30 ms with the cores busy (OpenMP threads wait for descheduled peers). DuckDB hands a
# UDF at most 2,048 rows and runs its own threads over nogil kernels, so it stays serial.
PARALLEL_MIN_QUERIES = 4096

# ---------------------------------------------------------------------------------------------- Signing (index/sign.py)

# Fewer rows than this are signed on the calling thread: a query, a DuckDB chunk of at
# most 2,048 rows (DuckDB runs its own threads over the nogil kernel). More are cut into
# chunks of SIGN_CHUNK_ROWS rows signed on every core by the same compiled kernel.
PARALLEL_MIN_ROWS = 4096
SIGN_CHUNK_ROWS = 1024
# distinct tokens a signer remembers the filtered form of (Lance's stemmer and stop words,
# index/sign.py); beyond it the memory starts over. A token costs its 64-byte record
# (kernels/vocab.py RECORD) and two table slots, for up to twice the tokens held: at most
# about 200 MB at this limit
TOKEN_MEMORY = 1 << 20
TOKENIZE_BATCH_TOKENS = 4096  # tokens handed to lance.tokenize per call (io/tokens.py)

# ------------------------------------------------------------------------------ Process caches of small objects

MAX_HANDLES = 64  # opened dataset handles (and pinned versions) kept (io/handles.py)
MAX_OPENED_INDEXES = 64  # opened index versions kept (index/opened.py; segment data is in the segment cache)
MAX_CACHED_REPORTS = 4  # index reports kept (diagnostics/report.py)

# ------------------------------------------------------- Reads of index files by position (io/chunks.py, io/mapped.py)

ROW_GAP_BYTES = 4096  # rows closer than this in the file are fetched in one read (a local file)
# An object store's reads of many rows: rows closer than what one stream reads in a call's
# share of the concurrent round trips (REMOTE_READ_CALL_SECONDS * REMOTE_READ_BYTES_PER_SECOND
# / CHUNK_READ_WORKERS, ~190 KB) share a read, so a dense request is read sequentially, in
# ranges of at most READ_SPAN_BYTES, at most READ_WINDOW_BYTES of them held at once.
REMOTE_ROW_GAP_BYTES = int(REMOTE_READ_CALL_SECONDS * REMOTE_READ_BYTES_PER_SECOND / CHUNK_READ_WORKERS)
READ_SPAN_BYTES = 4 << 20
READ_WINDOW_BYTES = 32 << 20

# a gather of this many rows or more hands each file page's mapped pages back as soon as
# it is copied (a self-join shard gathers 250k rows spread over a 2.6 GB file: mapped
# all at once they would add the whole file to the resident set); a query's few
# candidates are handed back in one call
PAGEWISE_RELEASE_ROWS = 1 << 14
# ... and no slice of ascending rows spans more of the file than this: a sparse gather (a
# self-join group's candidates, one doc in twenty) would otherwise map 350 MB of the file
# per slice of 16k rows (the kernel maps the pages around each fault too)
RELEASE_SPAN_BYTES = 8 << 20
# What Linux may map around a page fault of a file mapping: fault_around_bytes (16 pages)
# and, with large folios in the page cache, the whole folio (up to 2 MiB, measured on ext4
# as 1 MiB-aligned blocks): what is handed back is widened to blocks of this size
FAULT_AROUND_BYTES = 2 << 20
# Fewer rows than this are gathered by numpy indexing, more by a compiled loop
# (kernels/gather.py): a query's few hundred rows then load no numba.
SMALL_GATHER_ROWS = 1 << 12

# Pages a file's gathers may have touched before they are handed back to the OS at once:
# one system call per this many bytes, not one per query (a query's gather touches a few
# dozen pages; handing back a range costs the kernel a walk over all of it).
RELEASE_BYTES = 32 << 20

# ------------------------------- The build: scanning, sorting and spilling band rows (index/band_sorter.py, indexer/builder.py)

TEXT_BYTES = 256  # text bytes per row assumed when sizing scan batches
MAX_SCAN_ROWS = 65_536
MIN_SCAN_ROWS = 4_096
MIN_IO_BUFFER = 8 << 20
# decoded batches queued ahead by the scanner (build and report): Lance's defaults keep
# 300-550 MB in flight when the consumer is slower than the scan; a batch or two is enough
SCAN_READAHEAD = 2
WRITER_DEPTH = 2  # file writes queued for a writer thread
LANCE_WRITER_CACHE = 16 << 20  # LanceFileWriter: 8 MiB of column data per top-level column
MAX_PARTITIONS = 4096  # spill files per build (x2: keys and docs)
# average bytes of band rows a spill partition gets per flush of the spill buffer: the
# buffer holds no more docs than that needs (fewer partitions, a smaller buffer)
SPILL_APPEND_BYTES = 128 << 10
# below this many rows the heap cannot hold back much (a few batches per thread): no plan
# is tight, and the build leaves glibc's thresholds alone
HEAP_BOUND_MIN_ROWS = 4 * MAX_SCAN_ROWS

# How a build's budget is shared (index/band_sorter.py): the scan / sign / signature-write
# pipeline a quarter of it (at most 256 MiB, at least the pipeline's floor), bands.lance's
# write buffers an eighth (at most 32 MiB), the spill buffer the rest (at most 96 MiB, at
# least an eighth); the scanner's read buffer a quarter of the pipeline (8..64 MiB).
PIPELINE_SHARE = 0.25
MAX_PIPELINE_BYTES = 256 << 20
WRITER_SHARE = 0.125
MAX_WRITER_BYTES = 32 << 20
MIN_SPILL_BUFFER_SHARE = 0.125
MAX_SPILL_BUFFER_BYTES = 96 << 20
IO_BUFFER_SHARE = 0.25
MAX_IO_BUFFER = 64 << 20

# The band sort (kernels/sort.py: radix_sort_run): its first pass scatters a run into buckets
# of about BUCKET_ROWS rows (in the CPU's cache for the rest; 256 measured 10-20% faster than
# 512 on runs of 30k-500k hash keys, 128 and 64 no faster); a bucket is then finished by one
# counting pass and an insertion sort while no digit of that pass holds more than
# INSERTION_GROUP_ROWS rows, else by LSD passes
BUCKET_ROWS = 256
INSERTION_GROUP_ROWS = 32

SCAN_FRAGMENTS = 1  # fragments the scanner reads at once (the scan is not the bottleneck)
SCAN_BATCH_ROWS = 65_536  # rows per batch of a text-column scan and of a rewrite's scan (io/scan.py, io/rewrite.py)
BAND_WRITE_ROWS = 1 << 20  # band rows per BandsWriter.write (the progress bar's granularity; indexer/builder.py)
ROWID_CALL_ROWS = 1 << 20  # row ids per Lance call of a remap or a row-id scan (io/rowids.py)

# ------------------------------------------------------------------------------------ SQL (duck/)

MAX_SQL_SHARD_PAIRS = 1 << 25  # pairs one shard may return through SQL (~45 bytes each at the peak; duck/self_join.py)
SQL_PLANS = 64  # self-join and join plans kept for their statements (duck/self_join.py)
SHARED_SHARD_STATES = 4  # statements' shared pools and shingle sets kept between their branches (selfjoin/shared.py)
SQL_LAYOUTS = 256  # result layouts kept, one per result schema (duck/tables.py)
AWAITING_BYTES = 64 << 20  # search results computed at plan time awaiting their statement (duck/tables.py)
INLINE_MAX_CHARS = 1 << 16  # a search result longer than this as SQL text goes through _lms_search_rows (duck/tables.py)

# ------------------------------------------------------------------------------------ Reports (diagnostics/)

CANDIDATE_ROWS = 1 << 24  # bucket rows gathered at once for candidates per query (64 MiB; diagnostics/report.py)
REPORT_IO_BUFFER = 64 << 20  # the report's column scan: bytes of reads in flight (Lance's default: 2 GiB)
BAND_CHUNK_ROWS = 1 << 20  # band rows read at a time for bucket sizes (12 MiB; diagnostics/buckets.py)

# ---------------------------------------------------------------- The self-join's thread pipeline (runtime/pipeline.py)

MAX_WORKERS = 8  # items in flight at once (each shard holds its rows and buffers)
PIPELINE_QUEUE_DEPTH = 2  # results held ahead of the consumer per worker, all items together, by default

# -------------------------------------------------------------------------------------------- Lance takes (io/takes.py)

MAX_TAKE = 1 << 20  # row ids per Lance take call

# ------------------------------- Exact verification and star clustering (selfjoin/shingles.py, selfjoin/star.py)

# Rows of exact verification fetched by one Lance take and shingled together: Lance's
# reader holds several times the texts' bytes while it takes them (pages decoded), so a
# take's memory grows with its rows; past a few thousand, its time per row does not drop.
SHINGLE_FETCH_ROWS = 1 << 12
# What the process keeps of its memory once the texts are taken and shingled (Lance's
# decoded pages and metadata, the threads' heaps: 27-35 MB at 1M rows, the anonymous
# memory after ShingleSets.prefetch less its index): left out of the budget the pairs and
# links of an exact self-join are verified in.
TEXT_READER_BYTES = 32 << 20
# The shingle sets' index (INDEX_BYTES a candidate row) is held in memory while it takes at
# most SETS_SHARE of the budget; past it its columns live in temporary files, memory-mapped
# (file pages, which the OS keeps or drops), and the whole rest of the budget verifies.
SETS_SHARE = 1 / 8
# The texts are taken through a handle of their own whose metadata cache holds at most this
# (io/handles.py:take_reader): the opened handle's cache would keep the page metadata of
# every data file a take reads (tens of MB at 10M rows) for as long as the handle is kept.
TAKE_READER_CACHE_BYTES = 1 << 20
# Star's walk: a chunk of members (signatures, shingle sets) at most STAR_CHUNK_SHARE of
# the budget, at most STAR_ROWS rows; the component's centers held within
# STAR_CENTERS_SHARE, the older blocks written to disk past it (core/budget.py).
STAR_ROWS = 1 << 16
STAR_CHUNK_SHARE = 0.25
STAR_CENTERS_SHARE = 0.25
# The walk's arrays over all its members (each one's twin, equal values, similarity and,
# verifying exactly, Jaccard) are held in memory while they take at most STAR_WALKED_SHARE;
# past it they live in temporary files, memory-mapped (file pages, which the OS keeps or drops).
STAR_WALKED_SHARE = 0.25
# Centers a bucket lists in star's walk (the first in walk order): a member is compared
# with at most num_bands times this many centers, as a link with at most MAX_REPS
# representatives a bucket (selfjoin/links.py), whatever its component's size.
STAR_BUCKET_CENTERS = 16

# ----------------------------------------------- The self-join (selfjoin/steps.py, sizing.py, shards.py, pairs.py, ...)
# Every *_SHARE below is a fraction of what it divides (the budget unless it says
# otherwise); core/budget.py turns them into the budget's named parts.
SHARD_SHARE = 1 / 32  # a shard's band rows read at once: at most this share of the budget
POOL_SHARE = 0.625  # the candidates' pool: this share of the budget (less clusters' components)
READ_ROW_BYTES = BAND_ROW_BYTES  # a band row as read: key (8) and doc (4)
KEEP_SHARE = 1 / 16  # a group's rows kept from the marking pass: at most this share of the budget
MIN_SHARD_ROWS = 1 << 14  # band rows of a shard at the least, whatever the budget
PAIR_SHARE = 1 / 64  # a batch of pairs (24 bytes each) at most this share of the budget
PAIRS_AHEAD = 4  # batches of pairs held ahead of the consumer, all shards together
READ_AHEAD = 1  # shards' worth of band rows (bytes) read ahead of the marking pass
# the pairs' labels (4 bytes a row) are kept while they take at most this share of the pool
LABELS_SHARE = 0.5
LINKS_AHEAD = 1  # chunks of links (LINK_CHUNK links, 16 bytes each) held ahead of the union, all shards together
MIN_CHUNK_PAIRS = 1 << 10  # pairs of a batch at the least, whatever the budget
FETCH_ROWS = 1 << 16  # signatures a thread gathers at a time
MIN_WINDOW_ROWS = 64  # rows of a window (and of a giant bucket's chunk) at the least
GIANT_LINKS = 1 << 20  # links per kernel call in a giant bucket's chunk
LINK_CHUNK = 1 << 20  # links per kernel call
TAKE_ROWS = 1 << 16  # clustered rows fetched per Lance take
# An ingest extends the corpus index by a delta segment; when the index would then hold more
# than this many segments, the new rows and every segment but the largest are merged into
# one instead (lifecycle/ingest.py): a search reads each segment's page table, and the
# merge rewrites only the small segments' stored signatures, never the largest one's.
INGEST_MAX_SEGMENTS = 8
MAX_SIGNED_LEFTS = 2  # left datasets whose signed rows are kept (one version each)
DEFAULT_CHUNK_PAIRS = 1 << 20  # pairs per record batch
VISIT_BUDGET = 1 << 26  # pairs a kernel call visits before Python gets control back
SHARD_BAND_ROWS = 1 << 21  # band rows per shard by default (24 MiB of band data)
MAX_SHARDS = 1 << 16  # shards of one self-join at the most
BUCKET_WINDOW_ROWS = 1 << 14  # bucket rows whose signatures are gathered together (4 MiB at k=128)
SIGNATURE_READ_ROWS = 1 << 16  # rows per read when loading a segment's signatures whole
WHOLE_SIGNATURES_SHARE = 1 / 16  # a shard needing at least this share of a segment's docs loads them all
SELF_JOIN_PLANS = 8  # opened index versions whose runs (and signed unindexed rows) are kept
SHUFFLE_BLOCK_SHARE = 0.25  # a Ray shuffle's signature task reads this share of a pool's rows at a time
SHUFFLE_CACHE_SHARE = 0.125  # a shuffle task's worker's segment cache: at most this share of its budget
# The clusters' union-find (4 bytes a doc) and the candidates' bit set are held in memory
# while they take at most PARENT_SHARE of the pool's share (a 100M-row index's 412 MB under
# 1 GiB); past it the union-find lives in a temporary file (selfjoin/parent.py) whose pages
# resident at once are held within PARENT_PAGES_SHARE of the pool's share. A file-held
# union-find's touches are page faults (measured on the 2-core machine: 10-20 us a link of
# random docs against 0.02 us in memory), and about as many whatever its share once the
# file is several times larger: the rest of the pool is worth more to the groups.
PARENT_SHARE = 0.75
PARENT_PAGES_SHARE = 0.25
MIN_PARENT_BLOCKS = 4  # blocks a file-held union-find keeps resident at least, whatever its share

# ------------------------------------------------------------------- The dry run (diagnostics/estimate.py, costs.py, calibration.py)

# The component walk around a sampled row stops at this many rows: the rows dropped of a
# larger component are then counted as 1 - 1 / ESTIMATE_COMPONENT_ROWS per row at least
# (docs/estimate.md states the bias), and each sampled row searches at most this many rows.
ESTIMATE_COMPONENT_ROWS = 64
# A searched row with more candidates than this has a random subset of this many verified
# first, kept when it holds ESTIMATE_COMPONENT_ROWS - 1 neighbours under every rule asked
# (diagnostics/lookups.py): a row's verification then costs the same whatever the corpus.
ESTIMATE_VERIFY_ROWS = 1024
# The full self-join's projection (diagnostics/costs.py): its steps' rates measured (diagnostics/calibration.py) on
# CALIBRATION_SHARDS key-range shards of the index of about CALIBRATION_SHARD_ROWS band
# rows each (together a 10th of a 1M-row index at b=16, a 100th of 10M: the same work
# whatever the index), in CALIBRATION_REPEATS sets of shards spread over the bands, each
# rate the median of the sets' (a busy moment inflates one); a shard whose buckets hold
# more pairs than CALIBRATION_VISITS (about 0.3 s of visits) is not verified.
CALIBRATION_SHARDS = 24
CALIBRATION_REPEATS = 3
CALIBRATION_SERIAL_ROWS = 1 << 18  # rows the clusters' one-thread steps (union-find, table) are timed on
CALIBRATION_SHARD_ROWS = 1 << 16
CALIBRATION_VISITS = 1 << 24
# The visits are priced by the size of their bucket: classes of buckets of at least
# 2, 16, 256 and 4,096 rows (diagnostics/workload.py counts the full run's visits in each,
# diagnostics/calibration.py times each class on the sampled rows' own buckets of that class:
# sets of about CALIBRATION_CLASS_VISITS visits, a bucket cut to a random subset of
# CALIBRATION_CLASS_ROWS rows).
BUCKET_CLASSES = (2, 16, 256, 4096)
CALIBRATION_CLASS_VISITS = 1 << 20
CALIBRATION_CLASS_ROWS = 512
# Peak memory (VmHWM) of the pairs' self-join: 408-422 MB at 1M rows, 685-713 MB at 10M
# under the default budget (benchmarks/estimate.py): a process with the engine loaded,
# the pool's share of the budget, then ~35 bytes a row.
SELF_JOIN_BASE_BYTES = 222 << 20
SELF_JOIN_ROW_BYTES = 35
# minhash_clusters and minhash_dedup: ~16 bytes a clustered row more (their table of row
# id, cluster id and size is built once the pool is let go: +27 MB for 2.35M clustered
# rows at 10M, nothing measurable at 1M)
CLUSTERED_ROW_BYTES = 16
