# Shortcuts for the scripts the README names.
.PHONY: demo test ci
demo:
	scripts/run-demo
test:
	scripts/run-tests
ci:
	bash .ci/run
