module howfast.lab/k8s-lab

go 1.24
