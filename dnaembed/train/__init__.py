"""Training the encoder.

* :mod:`.config`: the run's settings as plain data (TOML in, TOML out), type-checked
  on loading (:mod:`.schema`);
* :mod:`.stages`: a recipe of runs that follow one another (``[[stage]]`` tables);
  :mod:`.recipe` runs it, :mod:`.card` writes the final model's card;
* :mod:`.loop`: the training loop (one process or one torchrun rank), with
  :mod:`.state` (checkpoints, resume, init) and :mod:`.batches` (each step's pairs,
  drawn ahead by a thread or by worker processes);
* :mod:`.pairs`: labelled pairs drawn on the fly from the storage channel;
* :mod:`.losses`: chi-squared, Poisson and MSE regression losses;
* :mod:`.ddp`: how it runs on several processes (torchrun, DDP, communication hooks).
"""
