module hap

go 1.26.8

require (
	github.com/spf13/pflag v1.0.10 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
