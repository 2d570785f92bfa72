module keysmith

go 1.19
