"""Training the encoder.

* :mod:`.config`: the run's settings as plain data (TOML in, TOML out);
* :mod:`.loop`: the training loop (one process or one torchrun rank);
* :mod:`.pairs`: labelled pairs drawn on the fly from the storage channel;
* :mod:`.losses`: chi-squared, Poisson and MSE regression losses;
* :mod:`.ddp`: how it runs on several processes (torchrun, DDP, communication hooks).
"""

