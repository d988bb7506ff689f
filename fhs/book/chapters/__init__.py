"""One module of tables, figures and check values per chapter (01 readiness ... 08 adaptation), unit-tested."""
