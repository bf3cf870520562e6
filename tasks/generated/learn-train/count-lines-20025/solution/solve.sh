#!/bin/bash
grep -cx anchor /app/samples.lst > /app/value.txt
