from rcattr.eval.citations.benchmark import main

main()
