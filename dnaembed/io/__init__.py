"""Reading and writing: sequences (FASTA/FASTQ, gzip, ``-``), tables, vectors, atomic outputs.

* :mod:`.sequences`: validated reads in (:class:`ReadSet`), FASTA/FASTQ out;
* :mod:`.tables`: the TSVs (clusters, truth, reports) read and written;
* :mod:`.vectors`: ``.npy`` embeddings streamed to disk with their ids;
* :mod:`.atomic`: every output written to a temporary file and renamed when complete.
"""

