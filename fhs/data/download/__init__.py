"""The data fetched from its publishers and verified: the lock, the downloads, the check.

``data.lock.json`` (beside these modules, shipped with the package) pins every file the
loaders read: its place under ``$FHS_DATA``, where its publisher serves it, its size and
SHA-256. ``fhs data fetch`` downloads what is missing (``fetch.py``, one file at a time
by ``transfer.py``, an archive's members by ``unpack.py``); ``fhs data check`` verifies a
folder (``check.py``); ``fhs data lock`` writes the lock from a complete folder
(``build.py``, with the publishers of ``publishers.py``). A lock is read as untrusted
input, every value checked (``lock_values.py``), and a fetch is bounded in time, rate and
size (``pace.py``).
"""
