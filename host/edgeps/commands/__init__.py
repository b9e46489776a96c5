"""One module per `edgeps` subcommand, each with ``configure(parser)`` and ``run(args)``."""
