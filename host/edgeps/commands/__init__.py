"""One module per `edgeps` subcommand: ``configure(parser)`` and ``run(args)``."""
