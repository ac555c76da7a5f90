"""Scores: clusterings against a truth, embeddings against exact distances, strands recovered.

* :mod:`.clustering`: A_gamma, ARI, NMI of a clusters table against a truth table;
* :mod:`.embedding`: how well squared distances approximate edit distances;
* :mod:`.recovery`: how many stored strands came back exactly.
"""

