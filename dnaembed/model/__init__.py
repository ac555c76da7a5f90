"""The encoder and everything needed to use it.

* :mod:`.encoder`: the CNN (its config as plain data), the squared-distance head;
* :mod:`.checkpoint`: model files (weights only, with a digest) and the bundled model;
* :mod:`.inference`: reads to vectors, in batches, on CPU or CUDA, and to ``.npy`` files.
"""

