#!/bin/bash
wc -l < /app/samples.lst > /app/count.txt
