"""Reading and writing: sequences (FASTA/FASTQ, gzip, ``-``), tables, vectors, atomic outputs.

* :mod:`.sequences`: validated reads in (:class:`ReadSet`), FASTA/FASTQ out;
* :mod:`.tables`: the TSVs (clusters, truth, reports) read and written;
* :mod:`.clusters`: every read's cluster and the clusters' representatives, written;
* :mod:`.formats`: other tools' cluster formats (vsearch ``.uc``, CD-HIT ``.clstr``,
  MMseqs2, Starcode), written and read;
* :mod:`.vectors`: ``.npy`` embeddings streamed to disk with their ids;
* :mod:`.atomic`: a command's outputs written to temporary files and renamed together
  when all are complete, never over an input.
"""

