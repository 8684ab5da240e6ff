module hap

go 1.26.8

require (
	github.com/ebitengine/purego v0.11.3
	github.com/spf13/pflag v1.0.10
	gonum.org/v1/gonum v0.17.0
	gopkg.in/yaml.v3 v3.0.1
)
