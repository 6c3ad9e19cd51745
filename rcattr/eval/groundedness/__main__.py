from rcattr.eval.groundedness.benchmark import main

main()
